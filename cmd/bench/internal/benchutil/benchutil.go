package benchutil

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"k8s.io/client-go/rest"
)

// Pct returns the p-th percentile (nearest rank) of ds; 0 for none.
func Pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(i, 0)]
}

// Ratio renders a/b as "1.23×": "-" when both are 0, "∞" when only b is.
func Ratio(a, b float64) string {
	if b == 0 {
		if a == 0 {
			return "-"
		}
		return "∞"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// Ms renders d in milliseconds, as a number.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Sleep waits d, or until ctx ends (returning ctx.Err()).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CountRequests makes every request a client built from cfg sends add 1
// to n (a watch counts once, when it starts), and returns cfg.
func CountRequests(cfg *rest.Config, n *atomic.Int64) *rest.Config {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			n.Add(1)
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// CountGRPC returns dial options that add 1 to n for every unary call and
// every message sent on a stream (an etcd lease keep-alive, a watch
// request).
func CountGRPC(n *atomic.Int64) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			n.Add(1)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, err
			}
			return countingStream{ClientStream: s, n: n}, nil
		}),
	}
}

type countingStream struct {
	grpc.ClientStream
	n *atomic.Int64
}

func (s countingStream) SendMsg(m any) error {
	s.n.Add(1)
	return s.ClientStream.SendMsg(m)
}
