package versiongate_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// instantStore is a store whose watches end at once, with nil, and which
// records the instants of the listings and status reads that follow.
type instantStore struct {
	versiongate.Store
	start        time.Time
	mu           sync.Mutex
	lists, reads []time.Duration
}

func (s *instantStore) ListRecords(ctx context.Context) ([]versiongate.Record, int64, error) {
	s.mu.Lock()
	s.lists = append(s.lists, time.Since(s.start))
	s.mu.Unlock()
	return s.Store.ListRecords(ctx)
}

func (s *instantStore) WatchRecords(context.Context, int64, func([]versiongate.Record, int64)) error {
	return nil
}

func (s *instantStore) ReadStatus(ctx context.Context) (versiongate.StoredStatus, error) {
	s.mu.Lock()
	s.reads = append(s.reads, time.Since(s.start))
	s.mu.Unlock()
	return s.Store.ReadStatus(ctx)
}

func (s *instantStore) WatchStatus(context.Context, int64, func(versiongate.StoredStatus) bool) error {
	return nil
}

// gateInstants runs a gate with Config.Rand r, that never wins, and its
// WaitReady, for two minutes of a bubble's time over watches that end at
// once, and returns the instants of its listings and status reads.
func gateInstants(t *testing.T, r func() float64) (lists, reads []time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		st := &instantStore{Store: versiongatetest.NewStore(versiongatetest.StoreConfig{}), start: time.Now()}
		g, err := versiongate.New(versiongate.Config{
			Store: st, NodeID: "a", Version: ver(t, "1.0.0"), MinimumCompatibleRelease: mustRelease(t, "1.0.0"),
			Decode: notMember, Candidate: neverWins, Rand: r,
			Reconcile: func(context.Context, versiongate.Term) error { return nil },
		})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() { _ = g.Run(ctx) })
		wg.Go(func() { _ = g.WaitReady(ctx) })
		<-time.After(2 * time.Minute)
		cancel()
		wg.Wait()
		st.mu.Lock()
		defer st.mu.Unlock()
		lists, reads = st.lists, st.reads
	})
	return lists, reads
}

// Config.Rand is the source of the gate's pauses: with a source that
// always draws 0.25 the node listings that follow watches ending at once
// come at exact instants (pauses of 100ms, 200ms, 400ms, ... each plus a
// quarter of its half), and WaitReady's status reads at the same instants
// in two runs, other than with another source.
func TestConfigRandDrawsTheGatesPauses(t *testing.T) {
	quarter := func() float64 { return 0.25 }
	lists, reads := gateInstants(t, quarter)
	require.GreaterOrEqual(t, len(lists), 4)
	require.Equal(t, []time.Duration{0, 112500 * time.Microsecond, 337500 * time.Microsecond, 787500 * time.Microsecond}, lists[:4])
	lists2, reads2 := gateInstants(t, quarter)
	require.Equal(t, lists, lists2)
	require.Greater(t, len(reads), 3)
	require.Equal(t, reads, reads2, "status reads: one source, two runs")
	_, reads3 := gateInstants(t, func() float64 { return 0.75 })
	require.NotEqual(t, reads, reads3, "status reads: another source")
}
