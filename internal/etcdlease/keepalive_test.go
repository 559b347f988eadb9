package etcdlease

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/reconkit/reconkit/internal/testenv"
)

// leaseServer is an etcd lease service that answers every keep-alive
// stream with err, or, if err is nil, every request on it with ttl; it
// counts the streams opened and the requests received.
type leaseServer struct {
	pb.UnimplementedLeaseServer
	err error
	ttl int64

	mu       sync.Mutex
	streams  int
	requests int
	// second, if not nil, is closed when the second stream opens.
	second chan struct{}
}

func (s *leaseServer) LeaseKeepAlive(stream pb.Lease_LeaseKeepAliveServer) error {
	s.mu.Lock()
	s.streams++
	if s.streams == 2 && s.second != nil {
		close(s.second)
	}
	s.mu.Unlock()
	if s.err != nil {
		// Read the request before answering, as a server does: an error
		// returned before the client's send makes that send fail with
		// io.EOF instead, which clientv3 does not retry, and the test of
		// its resends would then depend on which goroutine ran first.
		if _, err := stream.Recv(); err == nil {
			s.mu.Lock()
			s.requests++
			s.mu.Unlock()
		}
		return s.err
	}
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		s.mu.Lock()
		s.requests++
		s.mu.Unlock()
		if err := stream.Send(&pb.LeaseKeepAliveResponse{ID: req.ID, TTL: s.ttl}); err != nil {
			return nil
		}
	}
}

func (s *leaseServer) counts() (streams, requests int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams, s.requests
}

// serve starts srv on a loopback port and returns a client of it; both
// stop when the test ends.
func serve(t *testing.T, srv *leaseServer) *clientv3.Client {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer()
	pb.RegisterLeaseServer(g, srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(lis)
	}()
	t.Cleanup(func() { g.Stop(); <-done })
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"http://" + lis.Addr().String()},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// A server that answers every keep-alive with an error for ever gets
// exactly one stream and at most one request per call: nothing is sent
// again inside the call, whatever the error. Unavailable and Internal are
// the answers clientv3's own KeepAliveOnce resends at once.
func TestKeepAliveOnceSendsOneRequestPerCall(t *testing.T) {
	for _, code := range []codes.Code{codes.Unavailable, codes.Internal, codes.ResourceExhausted, codes.PermissionDenied} {
		t.Run(code.String(), func(t *testing.T) {
			srv := &leaseServer{err: status.Error(code, "injected")}
			cli := serve(t, srv)
			const calls = 5
			for i := range calls {
				_, err := KeepAliveOnce(t.Context(), cli, 1)
				require.Error(t, err)
				require.Equal(t, code, status.Code(err), "the server's answer is returned: %v", err)
				streams, requests := srv.counts()
				require.Equal(t, i+1, streams, "streams after %d calls", i+1)
				require.LessOrEqual(t, requests, i+1)
			}
		})
	}
}

// The spin KeepAliveOnce exists to avoid: clientv3's own keep-alive
// opens stream after stream against the same answer within one call
// (here it is stopped at its second).
func TestClientKeepAliveOnceResends(t *testing.T) {
	srv := &leaseServer{err: status.Error(codes.Unavailable, "injected"), second: make(chan struct{})}
	cli := serve(t, srv)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := cli.KeepAliveOnce(ctx, 1)
		done <- err
	}()
	select {
	case <-srv.second:
	case err := <-done:
		t.Fatalf("clientv3's KeepAliveOnce returned after one stream (%v): the helper may no longer be needed", err)
	}
	cancel()
	<-done
}

// An answer is returned as it is: the TTL granted, or ErrLeaseNotFound
// for a lease the server does not have (a TTL of zero or less).
func TestKeepAliveOnceAnswers(t *testing.T) {
	for _, tc := range []struct {
		ttl     int64
		want    time.Duration
		wantErr error
	}{
		{ttl: 7, want: 7 * time.Second},
		{ttl: 0, wantErr: rpctypes.ErrLeaseNotFound},
		{ttl: -1, wantErr: rpctypes.ErrLeaseNotFound},
	} {
		srv := &leaseServer{ttl: tc.ttl}
		cli := serve(t, srv)
		got, err := KeepAliveOnce(t.Context(), cli, 1)
		require.ErrorIs(t, err, tc.wantErr, "TTL %d", tc.ttl)
		require.Equal(t, tc.want, got, "TTL %d", tc.ttl)
		streams, requests := srv.counts()
		require.Equal(t, 1, streams)
		require.Equal(t, 1, requests)
	}
}

// A call whose context has ended sends nothing and says so.
func TestKeepAliveOnceEndedContext(t *testing.T) {
	srv := &leaseServer{ttl: 7}
	cli := serve(t, srv)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := KeepAliveOnce(ctx, cli, 1)
	require.ErrorIs(t, err, context.Canceled)
	_, requests := srv.counts()
	require.Zero(t, requests)
}

// On a real etcd: a granted lease is renewed with its TTL, and a revoked
// one is reported not found.
func TestKeepAliveOnceOnEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real etcd; skipped under -short")
	}
	cli := testenv.Etcd(t).Client(t)
	grant, err := cli.Grant(t.Context(), 30)
	require.NoError(t, err)
	ttl, err := KeepAliveOnce(t.Context(), cli, grant.ID)
	require.NoError(t, err)
	require.Greater(t, ttl, 20*time.Second)
	require.LessOrEqual(t, ttl, 30*time.Second)
	_, err = cli.Revoke(t.Context(), grant.ID)
	require.NoError(t, err)
	_, err = KeepAliveOnce(t.Context(), cli, grant.ID)
	require.True(t, errors.Is(err, rpctypes.ErrLeaseNotFound), "after a revoke: %v", err)
}
