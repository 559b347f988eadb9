package versiongate_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// logLines collects a logger's messages.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{})
}

func (l *logLines) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// decodeRelease is a host-owned decoder: the record's value is the
// node's release, and every record counts.
func decodeRelease(_ string, value []byte) (versiongate.Release, bool, error) {
	r, err := versiongate.ParseRelease(string(value))
	return r, err == nil, err
}

// A node that sees a newer release, even one it does not know, does not
// campaign; it campaigns once that node is gone.
func TestNewerReleaseStopsCampaigning(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	store := versiongatetest.NewStore(versiongatetest.StoreConfig{Clock: clk})
	store.PutRecord("newer", []byte("9.0.0"))
	var calls, newerPresent atomic.Int64
	g, err := versiongate.New(versiongate.Config{
		Store: store, NodeID: "a", Version: ver(t, "1.0.0"), MinimumCompatibleRelease: mustRelease(t, "1.0.0"),
		Decode: decodeRelease, Clock: clk,
		Candidate: versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) {
			calls.Add(1)
			if len(store.Records()) > 0 {
				newerPresent.Add(1)
			}
			<-ctx.Done()
			return nil, ctx.Err()
		}),
		Reconcile: func(context.Context, versiongate.Term) error { return nil },
	})
	require.NoError(t, err)
	logs := &logLines{}
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), logs.logger()))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = g.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })

	require.NoError(t, versiongatetest.Wait(ctx, "the campaign decision", func() bool {
		return logs.has("not campaigning") || logs.has("campaigning")
	}, nil))
	require.True(t, logs.has("does not have the newest release, not campaigning"), "decided to campaign beside a newer release")
	require.Zero(t, calls.Load())
	require.Equal(t, versiongate.PhaseIdle, g.Phase())

	store.RemoveRecord("newer")
	require.NoError(t, versiongatetest.Wait(ctx, "a campaign once the newer node is gone", func() bool { return calls.Load() > 0 }, nil))
	require.Zero(t, newerPresent.Load(), "campaigned while the newer node had a record")
}

// ctxTerm is a term that ends with its Campaign context, as some
// elections' terms do.
type ctxTerm struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func (t *ctxTerm) Context() context.Context     { return t.ctx }
func (t *ctxTerm) Token() uint64                { return 1 }
func (t *ctxTerm) Identity() string             { return "a" }
func (t *ctxTerm) Resign(context.Context) error { t.cancel(); return nil }

// With an election whose terms end with the Campaign context, the term is
// still live when the reconcile sees its own context end as Run stops: the
// gate releases the term only after the reconcile returned.
func TestTermOutlivesReconcileWhenCampaignContextEnds(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	store := versiongatetest.NewStore(versiongatetest.StoreConfig{Clock: clk})
	var term *ctxTerm
	entered := make(chan struct{})
	var liveAtEnd atomic.Bool
	g, err := versiongate.New(versiongate.Config{
		Store: store, NodeID: "a", Version: ver(t, "1.0.0"), MinimumCompatibleRelease: mustRelease(t, "1.0.0"),
		Decode: notMember, Clock: clk, SettleTime: -1,
		Candidate: versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) {
			tctx, cancel := context.WithCancel(ctx)
			term = &ctxTerm{ctx: tctx, cancel: cancel}
			return term, nil
		}),
		Reconcile: func(ctx context.Context, l versiongate.Term) error {
			close(entered)
			<-ctx.Done()
			liveAtEnd.Store(l.Context().Err() == nil)
			return ctx.Err()
		},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- g.Run(ctx) }()
	select {
	case <-entered:
	case <-time.After(versiongatetest.DefaultWait):
		cancel()
		<-errc
		t.Fatal("the reconcile never ran: the term ended as soon as Campaign returned")
	}
	cancel()
	require.NoError(t, <-errc)
	require.True(t, liveAtEnd.Load(), "the term ended while the reconcile ran")
	require.Error(t, term.Context().Err(), "the term is resigned once the reconcile returned")
}
