package versiongate_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// deletingStore models a status deleted by an operator and held by a
// finalizer, as kubestore's is: once deleted, every status read and write
// fails with ErrStatusDeleted until a Fence finishes the deletion, after
// which the status reads as missing. The deletion comes at one chosen
// point of the leader's pass: right after its next Fence (so that the
// pass's first read finds it), or at its next guarded write (a write not
// conditioned on the records, nodesRev 0).
type deletingStore struct {
	versiongate.Store
	mem *versiongatetest.Store

	mu           sync.Mutex
	deleted      bool
	afterFence   bool // delete the status right after the next Fence
	atWrite      bool // delete the status at the next guarded write
	fences       int  // Fences since the deletion
	deletedReads int  // reads answered with ErrStatusDeleted
}

func (s *deletingStore) Fence(ctx context.Context, t versiongate.Term) error {
	if err := s.Store.Fence(ctx, t); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted {
		s.deleted = false
		s.fences++
	}
	if s.afterFence {
		s.afterFence = false
		s.deleteLocked()
	}
	return nil
}

func (s *deletingStore) deleteLocked() {
	s.deleted, s.fences = true, 0
	s.mem.SetStatus(nil)
}

func (s *deletingStore) ReadStatus(ctx context.Context) (versiongate.StoredStatus, error) {
	s.mu.Lock()
	deleted := s.deleted
	if deleted {
		s.deletedReads++
	}
	s.mu.Unlock()
	if deleted {
		return versiongate.StoredStatus{}, fmt.Errorf("held by a finalizer: %w", versiongate.ErrStatusDeleted)
	}
	return s.Store.ReadStatus(ctx)
}

func (s *deletingStore) WriteStatus(ctx context.Context, t versiongate.Term, value []byte, nodesRev int64) error {
	s.mu.Lock()
	if s.atWrite && nodesRev == 0 {
		s.atWrite = false
		s.deleteLocked()
	}
	deleted := s.deleted
	s.mu.Unlock()
	if deleted {
		return fmt.Errorf("held by a finalizer: %w", versiongate.ErrStatusDeleted)
	}
	return s.Store.WriteStatus(ctx, t, value, nodesRev)
}

func (s *deletingStore) state() (deleted bool, fences, deletedReads int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleted, s.fences, s.deletedReads
}

// A status deleted between the leader's Fence and its first read of the
// status, or found deleted by its first guarded write (the WORKING mark
// of a compatible status), ends the pass at once: the leader fences again
// with the same term's token, which finishes the deletion, and goes on to
// write its status, all within its first term. A leader that retried the
// read or the write instead would retry for ever, since only a Fence
// recovers the status (each case removed from the gate fails its
// subtest).
func TestStatusDeletedInFirstReadOrGuardedWriteFencesAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		arm  func(s *deletingStore)
	}{
		{"first read", func(s *deletingStore) { s.afterFence = true }},
		{"guarded write", func(s *deletingStore) { s.atWrite = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				mem := versiongatetest.NewStore(versiongatetest.StoreConfig{})
				// A compatible status that is not the target: the leader
				// marks it WORKING with a guarded write.
				b, err := versiongate.Status{State: versiongate.StateDone, Version: mustVersion(t, "1.9.0"),
					MinimumCompatibleRelease: mustRelease(t, "2.0.0")}.Encode()
				require.NoError(t, err)
				mem.SetStatus(b)
				store := &deletingStore{Store: mem.Conn(), mem: mem}
				tc.arm(store)
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
				go func() { done <- g.Run(ctx) }()
				defer func() { cancel(); <-done }()
				start := time.Now()
				err = versiongatetest.WaitPhase(ctx, g, versiongate.PhaseDone)
				deleted, fences, reads := store.state()
				require.NoError(t, err, "the leader never wrote its status (still deleted: %v, fences since the delete: %d)", deleted, fences)
				t.Logf("done %v after the start; %d reads found the status deleted, %d fence recovered it", time.Since(start), reads, fences)
				require.False(t, deleted)
				require.Equal(t, 1, fences, "the status was recovered by one Fence")
				require.LessOrEqual(t, reads, 1, "the leader read a deleted status again instead of fencing")
				require.LessOrEqual(t, time.Since(start), 30*time.Second)
				require.Equal(t, versiongate.Status{State: versiongate.StateDone, Version: mustVersion(t, "2.0.0"),
					MinimumCompatibleRelease: mustRelease(t, "2.0.0")}, storedStatus(t, mem))
				require.Equal(t, uint64(1), campaigns.Load(), "recovered by a new term, not within the term")
			})
		})
	}
}
