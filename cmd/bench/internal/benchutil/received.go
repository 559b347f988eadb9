package benchutil

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
	"k8s.io/client-go/rest"
)

// CountReceived makes every response body a client built from cfg reads,
// watch streams included, add its bytes to n, and returns cfg. What a
// server sends its watchers shows here, also when the client discards it
// (a store that delivers only changes of a record's value still receives
// every renewal of every record it watches).
func CountReceived(cfg *rest.Config, n *atomic.Int64) *rest.Config {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if resp != nil && resp.Body != nil {
				resp.Body = countingBody{ReadCloser: resp.Body, n: n}
			}
			return resp, err
		})
	})
	return cfg
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	k, err := b.ReadCloser.Read(p)
	b.n.Add(int64(k))
	return k, err
}

// CountGRPCReceived returns a dial option that adds to n the wire length
// of every message the client receives, stream messages included.
func CountGRPCReceived(n *atomic.Int64) grpc.DialOption {
	return grpc.WithStatsHandler(receivedHandler{n: n})
}

type receivedHandler struct{ n *atomic.Int64 }

func (h receivedHandler) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (h receivedHandler) HandleRPC(_ context.Context, s stats.RPCStats) {
	if p, ok := s.(*stats.InPayload); ok {
		h.n.Add(int64(p.WireLength))
	}
}

func (h receivedHandler) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}

func (h receivedHandler) HandleConn(context.Context, stats.ConnStats) {}
