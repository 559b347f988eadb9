package versiongate_test

import (
	"context"
	"math/rand/v2"
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

// Config.Rand seeds the gate's pauses: the node listings that follow
// watches ending at once (pauses of 100ms, 200ms, 400ms, ... each plus up
// to half of it) and WaitReady's status reads come at the same instants
// in two runs given sources with the same seed, at other instants with
// another seed.
func TestConfigRandDrawsTheGatesPauses(t *testing.T) {
	seeded := func(seed uint64) func() float64 { return rand.New(rand.NewPCG(seed, 0)).Float64 }
	lists, reads := gateInstants(t, seeded(1))
	require.Greater(t, len(lists), 4)
	require.Greater(t, len(reads), 3)
	for i, base := 1, 100*time.Millisecond; i < 4; i, base = i+1, 2*base {
		pause := lists[i] - lists[i-1]
		require.True(t, pause >= base && pause <= base+base/2, "pause %d: %v outside [%v, 1.5×]", i, pause, base)
	}
	lists2, reads2 := gateInstants(t, seeded(1))
	require.Equal(t, lists, lists2, "listings: one seed, two runs")
	require.Equal(t, reads, reads2, "status reads: one seed, two runs")
	lists3, reads3 := gateInstants(t, seeded(2))
	require.NotEqual(t, lists, lists3, "listings: another seed")
	require.NotEqual(t, reads, reads3, "status reads: another seed")
}
