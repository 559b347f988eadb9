package etcdfault

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/internal/testenv"
)

// Answer is what a faulty etcd (or the network before it) answers every
// request of one agent with, once armed.
type Answer struct {
	Name string
	Code codes.Code // a gRPC status for every request; codes.OK for none
	// Watch answers every watch: "ends" closes it at once with no event,
	// "compacted" cancels it with etcd's compaction error.
	Watch string
	// Refused closes the proxy the agent talks through: every connection
	// attempt is refused.
	Refused bool
}

// Persistent returns the answers etcd, or a proxy before it, can give
// every request for ever.
func Persistent() []Answer {
	return []Answer{
		{Name: "Unavailable", Code: codes.Unavailable},
		{Name: "ResourceExhausted", Code: codes.ResourceExhausted},
		{Name: "PermissionDenied", Code: codes.PermissionDenied},
		{Name: "Unauthenticated", Code: codes.Unauthenticated},
		{Name: "DeadlineExceeded", Code: codes.DeadlineExceeded},
		{Name: "connection refused", Refused: true},
		{Name: "watch ends at once", Watch: "ends"},
		{Name: "compacted revision", Watch: "compacted"},
	}
}

// Classify names what an agent counts; a func that is nil, or returns "",
// counts nothing.
type Classify struct {
	// Unary names a unary request (method is gRPC's full method name).
	Unary func(method string, req any) string
	// Stream names a stream open (keep-alive streams; watches are counted
	// by Watch, since clientv3 multiplexes them on one stream).
	Stream func(ctx context.Context, method string) string
	// Watch names a watch the client's Watcher is asked for.
	Watch func(key string) string
}

// Request is one counted request: when it was sent, on the fake clock from
// the arming, and its name.
type Request struct {
	At   time.Duration
	Kind string
}

// Agent is one client whose requests are counted and, once armed,
// answered by the fault.
type Agent struct {
	clk      *testingclock.FakeClock
	ans      Answer
	classify Classify
	armed    atomic.Bool
	proxy    *testenv.ProxyServer
	// armedCh closes when the fault is armed; watches counts the
	// goroutines that forward watches from before it.
	armedCh chan struct{}
	watches sync.WaitGroup

	mu       sync.Mutex
	counting bool
	armedAt  time.Time
	sent     []Request
}

// New builds an agent's etcd client, through a proxy of its own in front
// of srv's first member so that its connections can be refused; the
// client is closed when the test ends. maxUnaryRetries 0 keeps the etcd
// client's default (a read answered Unavailable is sent up to 100 times,
// 25 ms apart on real time).
func New(t *testing.T, srv *testenv.EtcdCluster, clk *testingclock.FakeClock, ans Answer, maxUnaryRetries uint, c Classify) (*Agent, *clientv3.Client) {
	t.Helper()
	a := &Agent{clk: clk, ans: ans, classify: c, armedCh: make(chan struct{})}
	t.Cleanup(a.watches.Wait)
	a.proxy = testenv.Proxy(t, srv.Members[0].ClientAddr())
	cli := Client(t, a.proxy.Addr(), maxUnaryRetries, a.unary, a.stream)
	cli.Watcher = &watcher{Watcher: cli.Watcher, a: a}
	return a, cli
}

// Client is an etcd client of endpoint (host:port) whose requests pass
// unary and stream first (either may be nil); the etcd client's own
// retries run outside them, so they see each request sent on the wire.
// maxUnaryRetries 0 keeps the etcd client's default. It is closed when
// the test ends.
func Client(t *testing.T, endpoint string, maxUnaryRetries uint, unary grpc.UnaryClientInterceptor, stream grpc.StreamClientInterceptor) *clientv3.Client {
	t.Helper()
	var opts []grpc.DialOption
	if unary != nil {
		opts = append(opts, grpc.WithChainUnaryInterceptor(unary))
	}
	if stream != nil {
		opts = append(opts, grpc.WithChainStreamInterceptor(stream))
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            []string{"http://" + endpoint},
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		MaxUnaryRetries:      maxUnaryRetries,
		Logger:               zap.NewNop(),
		DialOptions:          opts,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func (a *Agent) record(kind string) {
	if kind == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.counting {
		a.sent = append(a.sent, Request{At: a.clk.Since(a.armedAt), Kind: kind})
	}
}

// Arm starts counting and answering every request with the fault. Every
// stream open before (a waiting watch) ends, as on a server restart, so
// that every loop meets the answer at once.
func (a *Agent) Arm() {
	a.mu.Lock()
	a.armedAt, a.counting = a.clk.Now(), true
	a.mu.Unlock()
	a.armed.Store(true)
	close(a.armedCh)
	if a.ans.Refused {
		_ = a.proxy.Close() // nothing listens on its port any more
		return
	}
	a.proxy.DropConnections()
}

// Disarm stops answering with a status, so that the loops can stop
// cleanly at the end of a test.
func (a *Agent) Disarm() { a.armed.Store(false) }

// Requests returns the requests counted within [from, to) of the arming.
func (a *Agent) Requests(from, to time.Duration) []Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Request
	for _, r := range a.sent {
		if r.At >= from && r.At < to {
			out = append(out, r)
		}
	}
	return out
}

func (a *Agent) fault() error {
	if a.armed.Load() && a.ans.Code != codes.OK {
		return status.Error(a.ans.Code, "injected: "+a.ans.Name)
	}
	return nil
}

func (a *Agent) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if a.classify.Unary != nil {
		a.record(a.classify.Unary(method, req))
	}
	if err := a.fault(); err != nil {
		return err
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (a *Agent) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if a.classify.Stream != nil {
		a.record(a.classify.Stream(ctx, method))
	}
	if err := a.fault(); err != nil {
		return nil, err
	}
	return streamer(ctx, desc, cc, method, opts...)
}

// watcher counts each watch asked for and answers the watch faults.
type watcher struct {
	clientv3.Watcher
	a *Agent
}

func (w *watcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	a := w.a
	if a.classify.Watch != nil {
		a.record(a.classify.Watch(key))
	}
	if a.ans.Watch == "" {
		return w.Watcher.Watch(ctx, key, opts...)
	}
	out := make(chan clientv3.WatchResponse)
	if a.armed.Load() {
		go a.answerWatch(ctx, out)
		return out
	}
	// A watch from before the fault meets it once armed: the client
	// library would otherwise resume it on its own.
	in := w.Watcher.Watch(ctx, key, opts...)
	a.watches.Add(1)
	go func() {
		defer a.watches.Done()
		for {
			select {
			case <-a.armedCh:
				a.answerWatch(ctx, out)
				return
			case wr, ok := <-in:
				if !ok {
					close(out)
					return
				}
				select {
				case out <- wr:
				case <-a.armedCh:
					a.answerWatch(ctx, out)
					return
				case <-ctx.Done():
					close(out)
					return
				}
			}
		}
	}()
	return out
}

// answerWatch ends a watch at once, or cancels it with etcd's compaction
// error.
func (a *Agent) answerWatch(ctx context.Context, out chan clientv3.WatchResponse) {
	defer close(out)
	if a.ans.Watch == "compacted" {
		select {
		case out <- clientv3.WatchResponse{CompactRevision: 1, Canceled: true}:
		case <-ctx.Done():
		}
	}
}
