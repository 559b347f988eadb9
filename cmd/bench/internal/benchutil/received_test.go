package benchutil

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/stats"
	"k8s.io/client-go/rest"
)

func TestCountReceived(t *testing.T) {
	var n atomic.Int64
	cfg := CountReceived(&rest.Config{}, &n)
	rt := cfg.WrapTransport(roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("0123456789"))}, nil
	}))
	resp, err := rt.RoundTrip(&http.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != 10 {
		t.Errorf("counted %d bytes, want 10", got)
	}
}

func TestCountGRPCReceived(t *testing.T) {
	var n atomic.Int64
	h := receivedHandler{n: &n}
	ctx := context.Background()
	h.HandleRPC(ctx, &stats.InPayload{Client: true, WireLength: 7})
	h.HandleRPC(ctx, &stats.OutPayload{Client: true, WireLength: 100})
	h.HandleRPC(ctx, &stats.InPayload{Client: true, WireLength: 5})
	if got := n.Load(); got != 12 {
		t.Errorf("counted %d bytes, want 12 (received only)", got)
	}
}
