package lbrecon_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// Tests of listings that go backwards (read replicas): within the declared
// lag a listing may miss what an earlier one showed. What a listing
// showed is kept (acks, intents, deletions, journal entries) until a
// listing started the lag after the call agrees, so no object is created
// twice and no deleted object comes back.

const replicaLag = 5 * time.Second

func replicaEngine(seed uint64) *lbrecontest.Engine {
	return newEngine(lbrecontest.Config{ReplicaLag: replicaLag, DeclareListLag: true, Seed: seed,
		Integrity: true, UniqueBinds: true})
}

// ours lists the engine's objects of lb.
func ours(eng *lbrecontest.Engine, lb lbrecon.LoadBalancer) []lbrecon.Object {
	var out []lbrecon.Object
	for _, o := range eng.Objects() {
		if strings.HasSuffix(o.Name, "."+lb.Suffix) {
			out = append(out, o)
		}
	}
	return out
}

// A load balancer converged and reconciled again and again for three
// times the lag (blocking every second, one pass every 300 ms: a host may
// call before RequeueAfter), with one create answer in four lost: never a
// duplicate, whatever the replicas show. Twelve seeds each (four under
// -short).
func TestReplicaListingsNoDuplicates(t *testing.T) {
	for _, oncePasses := range []bool{false, true} {
		for seed := range inShort[uint64](12, 4) {
			t.Run(fmt.Sprintf("once=%v/seed%d", oncePasses, seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					eng := replicaEngine(seed)
					eng.LoseCreateAnswers(4)
					lb := desc(2, 2, 3)
					r := newLB(t, eng, lb, nil)
					every := time.Second
					if oncePasses {
						every = 300 * time.Millisecond
					}
					for range int(3 * replicaLag / every) {
						if oncePasses {
							_, err := r.ReconcileOnce(t.Context())
							require.NoError(t, err)
						} else {
							require.NoError(t, r.Reconcile(t.Context()))
						}
						require.Zero(t, duplicates(eng), "objects: %v", eng.Objects())
						<-time.After(every) // the bubble's clock
					}
					require.NoError(t, r.Reconcile(t.Context()))
					<-time.After(replicaLag)
					require.Zero(t, duplicates(eng))
					requireConverged(t, eng, r, lb)
				})
			})
		}
	}
}

// A teardown right after a converge, on replicas, one pass at a time:
// the objects a replica leaves out are destroyed all the same, each once,
// and a deleted object a replica shows again is not believed back: once
// converged, the teardown stays converged. Twelve seeds, also under
// -short: they cost little, and a replica that shows a deleted object
// again comes in a few of them only.
func TestReplicaListingsTeardownLeavesNothing(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := replicaEngine(seed)
				eng.LoseCreateAnswers(4)
				lb := desc(2, 2, 3)
				r := newLB(t, eng, lb, nil)
				require.NoError(t, r.Reconcile(t.Context()))
				n := len(ours(eng, lb))
				eng.ResetCalls()
				// A host may call before RequeueAfter (a Service event): once
				// a second, past convergence by twice the lag.
				convergedAt := -1
				for i := 0; convergedAt < 0 || i < convergedAt+2*int(replicaLag/time.Second); i++ {
					require.Less(t, i, 200, "not converged")
					res, err := r.TeardownOnce(t.Context())
					require.NoError(t, err)
					if convergedAt >= 0 {
						require.True(t, res.Converged, "a replica showed a deleted object again: %+v", res.Plan)
					} else if res.Converged {
						convergedAt = i
					}
					<-time.After(time.Second) // the bubble's clock
				}
				require.Empty(t, ours(eng, lb), "leaked")
				require.Equal(t, n, eng.Calls()[lbrecon.VerbDestroy], "each object destroyed once")
			})
		})
	}
}

// hideParents lists its engine's objects but leaves the backends out of
// the next n listings, as a replica that shows children before parents.
type hideParents struct {
	*lbrecontest.Engine
	n int
}

func (h *hideParents) List(ctx context.Context, q lbrecon.Query) ([]lbrecon.Object, error) {
	objs, err := h.Engine.List(ctx, q)
	if err != nil || h.n == 0 {
		return objs, err
	}
	h.n--
	return slices.DeleteFunc(objs, func(o lbrecon.Object) bool { return o.Kind == lbrecon.KindBackend }), nil
}

// A listing that shows children without their parents is, within a
// declared lag, a wait: blocking or one pass at a time, the reconciler
// lists again and converges, changing nothing meanwhile. Without a lag it
// is ErrInconsistent; past the lag the children are orphans
// (orphan_test.go).
func TestChildBeforeParentWithinTheLag(t *testing.T) {
	for _, tc := range []struct {
		name     string
		lag      time.Duration
		hidden   int
		wantFail bool
	}{
		{"within the lag", 2 * time.Second, 2, false},
		{"no lag declared", 0, 2, true},
	} {
		for _, oncePasses := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/once=%v", tc.name, oncePasses), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					eng := newEngine(lbrecontest.Config{})
					lb := desc(2, 1, 2)
					require.NoError(t, newLB(t, eng, lb, nil).Reconcile(t.Context()))
					h := &hideParents{Engine: eng, n: tc.hidden}
					r := newLB(t, h, lb, func(c *lbrecon.Config) { c.ListLag = tc.lag })
					eng.ResetCalls()
					var err error
					if oncePasses {
						for range 20 {
							var res lbrecon.Result
							res, err = r.ReconcileOnce(t.Context())
							if err != nil || res.Converged {
								break
							}
							require.Positive(t, res.RequeueAfter)
							<-time.After(res.RequeueAfter)
						}
					} else {
						err = r.Reconcile(t.Context())
					}
					if tc.wantFail {
						require.ErrorIs(t, err, lbrecon.ErrInconsistent)
					} else {
						require.NoError(t, err)
					}
					calls := eng.Calls()
					require.Zero(t, calls[lbrecon.VerbCreate]+calls[lbrecon.VerbDestroy]+calls[lbrecon.VerbUpdate], "nothing changed")
				})
			})
		}
	}
}
