package versiongate_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// tokenRecorder records the token of every reconcile.
type tokenRecorder struct {
	mu     sync.Mutex
	tokens []uint64
}

func (r *tokenRecorder) reconcile(_ context.Context, t versiongate.Term) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tokens = append(r.tokens, t.Token())
	return nil
}

func (r *tokenRecorder) list() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.tokens)
}

// The in-memory store (as etcd's) keeps no deleted status: a status
// deleted, damaged or set back by hand while the leader keeps its term
// reads as missing, corrupt or older. The leader's periodic read-back
// finds it within a reconcile interval and starts over within the term:
// while an old node that may serve on the changed status has its record,
// it neither reconciles nor writes; once the node goes it reconciles and
// writes its status again, all with its first term's token.
func TestLeaderRecoversStatusChangedMidTerm(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(s *versiongatetest.Store)
	}{
		{"deleted", func(s *versiongatetest.Store) { s.SetStatus(nil) }},
		{"corrupt", func(s *versiongatetest.Store) { s.SetStatus([]byte("\x08\x02garbage")) }},
		{"set back", func(s *versiongatetest.Store) {
			b, err := versiongate.Status{State: versiongate.StateDone, Version: mustVersion(t, "1.0.0"),
				MinimumCompatibleRelease: mustRelease(t, "1.0.0")}.Encode()
			require.NoError(t, err)
			s.SetStatus(b)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				store := versiongatetest.NewStore(versiongatetest.StoreConfig{})
				var campaigns atomic.Uint64
				rec := &tokenRecorder{}
				g, err := versiongate.New(versiongate.Config{
					Store: store.Conn(), NodeID: "new", Version: mustVersion(t, "2.0.0"),
					MinimumCompatibleRelease: mustRelease(t, "2.0.0"),
					Candidate: versiongate.CandidateFunc(func(context.Context) (versiongate.Term, error) {
						return versiongatetest.NewTerm("new", 10+campaigns.Add(1)), nil
					}),
					Reconcile: rec.reconcile,
				})
				require.NoError(t, err)
				done := make(chan error, 1)
				go func() { done <- g.Run(ctx) }()
				defer func() { cancel(); <-done }()
				require.NoError(t, versiongatetest.WaitPhase(ctx, g, versiongate.PhaseDone))
				target := storedStatus(t, store)

				store.PutRecord("old", nodeRecord(t, "old", "1.0.0"))
				tc.change(store)
				changed, _ := store.Status()
				<-time.After(versiongate.DefaultReconcileInterval + 5*time.Second)
				synctest.Wait()
				require.Equal(t, versiongate.PhaseRestricting, g.Phase(), "the leader did not notice the status changed")
				<-time.After(10 * versiongate.DefaultReconcileInterval)
				synctest.Wait()
				require.Equal(t, []uint64{11}, rec.list(), "reconciled while an old node may serve on the changed status")
				now, _ := store.Status()
				require.Equal(t, changed, now, "wrote the status while an old node may serve on the changed one")

				store.RemoveRecord("old")
				require.NoError(t, versiongatetest.WaitPhase(ctx, g, versiongate.PhaseDone))
				require.Equal(t, target, storedStatus(t, store))
				require.Equal(t, []uint64{11, 11}, rec.list(), "not recovered within the first term")
				require.Equal(t, uint64(1), campaigns.Load())
			})
		})
	}
}

// goneStore answers every status read with ErrStatusDeleted once gone is
// set, however often the leader fences again: a store whose recovery
// never takes. Past limit reads it stops the gate, so that a leader that
// spins fails the test on its count instead of hanging it.
type goneStore struct {
	versiongate.Store
	gone  atomic.Bool
	halt  func()
	limit int64
	mu    sync.Mutex
	calls []time.Time
}

func (s *goneStore) count() {
	s.mu.Lock()
	s.calls = append(s.calls, time.Now())
	n := len(s.calls)
	s.mu.Unlock()
	if int64(n) > s.limit {
		s.halt()
	}
}

func (s *goneStore) callsIn(from, to time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, at := range s.calls {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

func (s *goneStore) ReadStatus(ctx context.Context) (versiongate.StoredStatus, error) {
	if !s.gone.Load() {
		return s.Store.ReadStatus(ctx)
	}
	s.count()
	return versiongate.StoredStatus{}, fmt.Errorf("held by a finalizer: %w", versiongate.ErrStatusDeleted)
}

func (s *goneStore) Fence(ctx context.Context, t versiongate.Term) error {
	if s.gone.Load() {
		s.count()
	}
	return s.Store.Fence(ctx, t)
}

// A status whose recovery never takes (each Fence succeeds, each read
// after it finds the status being deleted again) makes the leader start
// over paced by a backoff with jitter, never in a loop: from 30s on at
// most one store call a second, and it keeps its term.
func TestStatusGoneEveryPassIsPaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		gctx, halt := context.WithCancel(ctx)
		store := &goneStore{Store: versiongatetest.NewStore(versiongatetest.StoreConfig{}), halt: halt, limit: 5000}
		var campaigns atomic.Uint64
		g, err := versiongate.New(versiongate.Config{
			Store: store, NodeID: "new", Version: mustVersion(t, "2.0.0"),
			MinimumCompatibleRelease: mustRelease(t, "2.0.0"),
			Candidate: versiongate.CandidateFunc(func(context.Context) (versiongate.Term, error) {
				return versiongatetest.NewTerm("new", 10+campaigns.Add(1)), nil
			}),
			Reconcile: func(context.Context, versiongate.Term) error { return nil },
		})
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- g.Run(gctx) }()
		defer func() { cancel(); <-done }()
		require.NoError(t, versiongatetest.WaitPhase(ctx, g, versiongate.PhaseDone))
		start := time.Now()
		store.gone.Store(true)
		<-time.After(3 * time.Minute)
		synctest.Wait()
		first := start.Add(versiongate.DefaultReconcileInterval)
		early, late := store.callsIn(start, first.Add(30*time.Second)), store.callsIn(first.Add(30*time.Second), time.Now())
		t.Logf("store calls in the first 30s after the read-back found the status gone: %d; in the %v after: %d", early, time.Since(first.Add(30*time.Second)), late)
		require.LessOrEqual(t, early, 100, "the leader spins on a status that stays gone")
		require.LessOrEqual(t, late, int(time.Since(first.Add(30*time.Second))/time.Second), "the leader spins on a status that stays gone")
		require.Positive(t, late, "the leader stopped trying")
		require.Equal(t, uint64(1), campaigns.Load(), "the term ended")
	})
}
