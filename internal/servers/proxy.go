package servers

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of one server. A test can cut
// its traffic (a partition: bytes are held, not refused, so requests time
// out as they would on a real network), restore it, delay it, or drop every
// open connection.
type Proxy struct {
	target string
	ln     net.Listener

	mu    sync.Mutex
	cut   bool
	delay time.Duration
	wake  chan struct{} // closed when cut or delay changes
	conns map[net.Conn]struct{}

	wg     sync.WaitGroup
	closed chan struct{}
	once   sync.Once
}

// StartProxy listens on a free loopback port and forwards every connection
// to target (host:port).
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("servers: proxy listen: %w", err)
	}
	p := &Proxy{
		target: target,
		ln:     ln,
		wake:   make(chan struct{}),
		conns:  make(map[net.Conn]struct{}),
		closed: make(chan struct{}),
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's address, 127.0.0.1:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Cut holds all traffic in both directions until Restore. Connections stay
// open and new ones are accepted, but no byte passes. Held bytes are
// delivered after Restore, as when a real partition heals: a request the
// client gave up on during the cut may still reach the server then.
func (p *Proxy) Cut() { p.set(func() { p.cut = true }) }

// Restore lets held and new traffic pass again.
func (p *Proxy) Restore() { p.set(func() { p.cut = false }) }

// SetDelay delays every chunk of data by d in each direction; 0 removes
// the delay.
func (p *Proxy) SetDelay(d time.Duration) { p.set(func() { p.delay = d }) }

// DropConnections closes every open connection, as a peer reset would.
func (p *Proxy) DropConnections() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

func (p *Proxy) set(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
	close(p.wake)
	p.wake = make(chan struct{})
}

// Close stops the proxy, closes every connection and waits for its
// goroutines.
func (p *Proxy) Close() error {
	p.once.Do(func() {
		close(p.closed)
		p.ln.Close()
		p.DropConnections()
	})
	p.wg.Wait()
	return nil
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.closed:
		c.Close()
		return false
	default:
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.serve(down)
	}
}

func (p *Proxy) serve(down net.Conn) {
	defer p.wg.Done()
	if !p.track(down) {
		return
	}
	defer p.untrack(down)
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(up, down) }()
	go func() { defer wg.Done(); p.pipe(down, up) }()
	wg.Wait()
}

// pipe copies src to dst, holding data while the proxy is cut and delaying
// it when asked. When either side ends, both are closed.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.pass() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed side: end both directions
		}
	}
}

// pass blocks while the proxy is cut and for the configured delay. It
// returns false when the proxy closes.
func (p *Proxy) pass() bool {
	for {
		p.mu.Lock()
		cut, delay, wake := p.cut, p.delay, p.wake
		p.mu.Unlock()
		if !cut {
			if delay > 0 {
				t := time.NewTimer(delay)
				select {
				case <-t.C:
				case <-p.closed:
					t.Stop()
					return false
				}
			}
			return true
		}
		select {
		case <-wake:
		case <-p.closed:
			return false
		}
	}
}
