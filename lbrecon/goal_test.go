package lbrecon_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// The goal on read replicas, with the journal: a load balancer's life
// (created, changed, deleted, or created and changed) driven by processes
// that crash or fail over at random times, on a provider whose listings
// go backwards within a declared 3 s (random per object and listing), one
// create answer in seven lost and shown late, a token bucket, and a
// fence that refuses a deposed term's token. Each new process has a new
// term's token, no memory, and the journal file. At the end, after the
// lag: no duplicate, and nothing left beyond the desired objects (none
// after a delete).

type goalOutcome struct {
	dups, leaked, disruptions, inconsistent, stuck int
	crashesMidWrite                                int // crashes of a process that had sent a write
	fenced, throttled, outsideDeletes              int
}

// goalRun runs one life; with a shape, the plan begins with the load
// balancer itself (Provision) on that shape's model, whose address shows
// a second after it is ok, the change also switches externalTrafficPolicy
// to Local (a health check), and between phases someone may delete the
// load balancer with its children.
func goalRun(t *testing.T, seed uint64, s *shape) goalOutcome {
	var out goalOutcome
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(seed, 35))
		cfg := lbrecontest.Config{Latency: 20 * time.Millisecond, Pending: time.Second,
			ReplicaLag: 3 * time.Second, DeclareListLag: true, Seed: seed, DeleteDelay: 2 * time.Second,
			Integrity: true, UniqueBinds: true, Rate: 10, Burst: 5, Fence: true}
		created, changed := desc(2, 2, 3), desc(3, 2, 2)
		if s != nil {
			cfg.VIPDelay = time.Second
			cfg = s.model(cfg)
			created, changed = s.provisioned(2, 3), s.provisioned(3, 2)
			changed.HealthCheck = &lbrecon.HealthCheck{Port: 32000, Path: "/healthz"}
		}
		eng := lbrecontest.New(cfg)
		eng.LoseCreateAnswers(7)
		cr := lbrecontest.NewCrasher(eng)
		path := filepath.Join(t.TempDir(), "lb-1.journal")

		phases := []*lbrecon.LoadBalancer{&created, &changed, nil} // nil: deleted
		if rng.IntN(3) == 0 {
			phases = phases[:2]
		}
		last := created
		token := uint64(1)
		for i, want := range phases {
			lb := last
			if want != nil {
				lb = *want
			}
			for attempt := 0; ; attempt++ {
				r := newLB(t, cr, lb, func(c *lbrecon.Config) { c.Journal = lbrecon.NewFileJournal(path) })
				ctx, cancel := context.WithCancel(lbrecon.WithToken(t.Context(), token))
				// A disruption at a random time of this process's life,
				// less likely at each attempt so that the phase ends.
				var timer *time.Timer
				crash := rng.IntN(2) == 0
				if rng.IntN(attempt+2) < 2 {
					at := time.Duration(rng.Int64N(int64(6 * time.Second)))
					timer = time.AfterFunc(at, func() {
						if crash {
							cr.Crash()
						}
						cancel() // a crash, or the term's end: the context ends
					})
				}
				var err error
				if want == nil {
					err = r.Teardown(ctx)
				} else {
					err = r.Reconcile(ctx)
				}
				if timer != nil {
					timer.Stop()
				}
				cancel()
				if errors.Is(err, lbrecon.ErrInconsistent) {
					out.inconsistent++
					t.Logf("ErrInconsistent: %v", err)
				}
				select {
				case <-cr.Crashed():
					if err != nil && cr.Sent() > 0 {
						out.crashesMidWrite++
					}
					cr.Restart()
				default:
				}
				token++ // the next process is the next term
				if err == nil {
					break
				}
				out.disruptions++
				if attempt == 50 {
					out.stuck++ // a duplicate stops every pass (ErrInconsistent)
					break
				}
			}
			last = lb
			if s != nil && want != nil && i < len(phases)-1 && rng.IntN(3) == 0 {
				for _, o := range eng.Objects() {
					if o.Kind == lbrecon.KindLoadBalancer {
						eng.DeleteTree(o.Key()) // someone else deletes it
						out.outsideDeletes++
					}
				}
			}
		}
		<-time.After(2 * 3 * time.Second) // past the lag: listings tell the truth
		out.dups = duplicates(eng)
		want := 0
		if phases[len(phases)-1] != nil {
			want = objectCount(last)
		}
		out.leaked = len(ours(eng, last)) - want
		if want > 0 && !lbrecontest.Converged(last, owner)(eng.Objects()) {
			out.leaked++ // not what the last phase wanted
		}
		out.fenced, out.throttled = eng.Fenced(), eng.Throttled()
	})
	return out
}

func TestGoalCrashesAndFailoversOnReplicas(t *testing.T) { goal(t, nil) }

// The goal with the load balancer first, on the ELB- and HAProxy-shaped
// models.
func TestGoalLoadBalancerFirstOnReplicas(t *testing.T) {
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) { goal(t, &s) })
	}
}

// goalSeeds are the lives goal runs: 100, or 8 under -short, among them
// 11 and 17, whose replicas list objects confirmed too early as missing
// (the defect of confirming an ack at the first listing that shows it,
// which seeds 0 to 10 do not show).
func goalSeeds() []uint64 {
	if testing.Short() {
		return []uint64{0, 1, 2, 3, 4, 5, 11, 17}
	}
	seeds := make([]uint64, 100)
	for i := range seeds {
		seeds[i] = uint64(i)
	}
	return seeds
}

// goal runs goalSeeds' lives and sums their outcomes.
func goal(t *testing.T, s *shape) {
	var total goalOutcome
	seeds := goalSeeds()
	runs := len(seeds)
	for _, seed := range seeds {
		var o goalOutcome
		t.Run(fmt.Sprint(seed), func(t *testing.T) { o = goalRun(t, seed, s) })
		total.dups += o.dups
		total.leaked += o.leaked
		total.disruptions += o.disruptions
		total.inconsistent += o.inconsistent
		total.stuck += o.stuck
		total.fenced += o.fenced
		total.throttled += o.throttled
		total.outsideDeletes += o.outsideDeletes
		total.crashesMidWrite += o.crashesMidWrite
	}
	t.Logf("%d runs: %d crashes and failovers (%d crashes after a write), %d load balancers deleted by someone else, %d duplicates, %d leaked, %d phases stuck, %d ErrInconsistent, %d writes fenced, %d calls throttled",
		runs, total.disruptions, total.crashesMidWrite, total.outsideDeletes, total.dups, total.leaked, total.stuck, total.inconsistent, total.fenced, total.throttled)
	// The processes did crash with their work under way.
	require.Positive(t, total.crashesMidWrite, "no process crashed after sending a write")
	require.Zero(t, total.dups)
	require.Zero(t, total.leaked)
	require.Zero(t, total.stuck)
	// A replica may list a new child before its parent: within the lag
	// that is a wait, not an error.
	require.Zero(t, total.inconsistent)
}
