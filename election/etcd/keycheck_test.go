package etcd_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/etcd"
	"github.com/reconkit/reconkit/internal/etcdfault"
	"github.com/reconkit/reconkit/internal/testenv"
)

// silentWatcher is a server (or a proxy) that accepts every watch and never
// delivers an event, an error or an end: a stream stuck behind a proxy.
type silentWatcher struct{ clientv3.Watcher }

func (silentWatcher) Watch(ctx context.Context, _ string, _ ...clientv3.OpOption) clientv3.WatchChan {
	ch := make(chan clientv3.WatchResponse)
	context.AfterFunc(ctx, func() { close(ch) })
	return ch
}

// reportedRenewals reports every renewal of the elector (one keep-alive
// request, see isRenewal) on calls once it was answered.
type reportedRenewals struct {
	calls chan struct{}
}

func (r *reportedRenewals) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || !isRenewal(ctx, method) {
		return s, err
	}
	return &answeredStream{ClientStream: s, answered: func() {
		select {
		case r.calls <- struct{}{}:
		case <-ctx.Done():
		}
	}}, nil
}

// answeredStream calls answered after its first message was received.
type answeredStream struct {
	grpc.ClientStream
	answered func()
	once     sync.Once
}

func (s *answeredStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	s.once.Do(s.answered)
	return err
}

// The term ends when its key is deleted even if the watch on the key never
// tells: each renewal checks the key, so the term ends at the first renewal
// after the deletion, with the lease still alive and long before its
// ValidUntil.
func TestEtcdKeyDeletedEndsTermAtNextRenewal(t *testing.T) {
	t.Parallel() // an etcd of its own; waits on the server, not the CPU
	srv := testenv.Etcd(t)
	admin := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clk := testingclock.NewFakeClock(time.Now())
	r := &reportedRenewals{calls: make(chan struct{}, 1)}
	cli := etcdfault.Client(t, srv.Members[0].ClientAddr(), 0, nil, r.stream)
	cli.Watcher = silentWatcher{cli.Watcher}
	e, err := etcd.New(etcd.Config{Client: cli, Prefix: "/keycheck", Identity: "leader", SessionTTL: 10 * time.Second, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	l, err := e.Campaign(ctx)
	require.NoError(t, err)
	receive(t, r.calls, "the Campaign's confirming renewal")
	validUntil := l.(*etcd.Leadership).ValidUntil()

	_, err = admin.Delete(ctx, l.(*etcd.Leadership).Key())
	require.NoError(t, err)
	// Step until the first renewal (due after TTL/3) has been sent.
	for renewed := false; !renewed; {
		require.True(t, clk.Now().Before(validUntil.Add(-time.Second)), "no renewal before ValidUntil")
		clk.Step(100 * time.Millisecond)
		select {
		case <-r.calls:
			renewed = true
		case <-time.After(50 * time.Millisecond):
		}
	}
	select {
	case <-l.Context().Done():
	case <-time.After(spinDeadline):
		require.FailNow(t, "the term outlived a renewal that found its key deleted")
	}
	require.ErrorIs(t, context.Cause(l.Context()), election.ErrLeadershipLost)
	require.True(t, clk.Now().Before(validUntil), "the term ended by its ValidUntil, not by the renewal")
	require.NoError(t, l.Resign(ctx))
}
