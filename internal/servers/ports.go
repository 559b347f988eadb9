package servers

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// freePorts returns n distinct TCP ports on 127.0.0.1 that were free a moment
// ago. Holding all listeners until every port is chosen keeps them distinct.
//
// A server keeps its port across Restart, so the port must not be one the
// kernel hands out as the local end of outgoing connections: between the stop
// and the start, any process's connect could take it, and the restarted
// server fails with "address already in use". The ports are therefore chosen
// outside the ephemeral range where the system says what it is (Linux), and
// by the kernel otherwise.
func freePorts(n int) ([]int, error) {
	lo, hi := fixedPortRange(readEphemeralRange())
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for len(ports) < n {
		l, err := listenOutside(lo, hi)
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// listenOutside listens on a random free port in [lo, hi), or on one the
// kernel picks when that range is empty.
func listenOutside(lo, hi int) (net.Listener, error) {
	if hi <= lo {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("servers: finding a free port: %w", err)
		}
		return l, nil
	}
	var last error
	for range 256 {
		port := lo + rand.IntN(hi-lo)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			return l, nil
		}
		last = err
	}
	return nil, fmt.Errorf("servers: no free port in [%d, %d) after 256 tries: %w", lo, hi, last)
}

// minFixedPorts is the smallest range worth choosing fixed ports from.
const minFixedPorts = 1000

// fixedPortRange returns the range [lo, hi) to choose fixed ports from, given
// the kernel's ephemeral range [elo, ehi] (both 0 when unknown): below it
// from 10000 up, else above it, else empty (let the kernel pick).
func fixedPortRange(elo, ehi int) (lo, hi int) {
	const floor = 10000
	switch {
	case elo == 0 && ehi == 0:
		return 0, 0
	case elo-floor >= minFixedPorts:
		return floor, elo
	case 65535-ehi >= minFixedPorts:
		return ehi + 1, 65536
	default:
		return 0, 0
	}
}

// readEphemeralRange reads Linux's ephemeral port range; 0, 0 where there is
// none to read.
func readEphemeralRange() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || lo <= 0 || hi < lo || hi > 65535 {
		return 0, 0
	}
	return lo, hi
}
