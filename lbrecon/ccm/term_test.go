package ccm_test

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
	v1 "k8s.io/api/core/v1"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// events records, in order, the fence's admissions and the provider's
// listings and the journal's openings, to check what a call did first.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) add(format string, a ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, fmt.Sprintf(format, a...))
}

func (e *events) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.got
	e.got = nil
	return out
}

// loads records every Load of a Service's journal for load balancer id.
type loads struct {
	lbrecon.Journal
	id string
	ev *events
}

func (l loads) Load(ctx context.Context) ([]lbrecon.Intent, error) {
	l.ev.add("load %s", l.id)
	return l.Journal.Load(ctx)
}

// listing records every List of the engine it wraps.
type listing struct {
	lbrecon.Engine
	ev *events
}

func (l listing) List(ctx context.Context, q lbrecon.Query) ([]lbrecon.Object, error) {
	l.ev.add("list")
	return l.Engine.List(ctx, q)
}

// opening records every journal a Balancer opens for a reconciler, and
// every Load of it.
type opening struct {
	ccm.Journal
	ev *events
}

func (o opening) For(svc *v1.Service, id string) lbrecon.Journal {
	o.ev.add("journal %s", id)
	return loads{Journal: o.Journal.For(svc, id), id: id, ev: o.ev}
}

// fenceEvents returns an events record, a provider with a one-second lag,
// a fence and an admit function of it that records each admission.
func fenceEvents() (*events, *lbrecontest.Engine, *lbrecon.Fence, func(uint64) error) {
	ev := &events{}
	eng := lbrecontest.New(lbrecontest.Config{Pending: time.Second, ListLag: time.Second})
	fence := lbrecon.NewFence("provider", 0, "")
	return ev, eng, fence, func(token uint64) error {
		ev.add("admit %d", token)
		return fence.Admit(token)
	}
}

// A call that brings a new term's token raises the fence to it before it
// reads anything, and the Service's reconciler, kept, reads the journal
// again before it lists: a deposed replica's later writes are refused,
// and what it created in between is not missed.
func TestNewTermRaisesTheFenceBeforeReading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev, eng, fence, admit := fenceEvents()
		journal := opening{Journal: &ccm.MemoryJournal{}, ev: ev}
		var mu sync.Mutex
		term := uint64(3)
		b := newBalancer(t, listing{Engine: eng, ev: ev}, func(c *ccm.Config) {
			c.Admit, c.Journal = admit, journal
			c.Token = func(context.Context) (uint64, error) {
				mu.Lock()
				defer mu.Unlock()
				return term, nil
			}
		})
		svc := service("uid-1")
		_, _, err := ensure(t, b, svc, nodes(1))
		require.NoError(t, err)
		first := ev.take()
		require.Equal(t, "admit 3", first[0], "the first call raises the fence first: %q", first)

		// Another replica's term (4) wrote and ended; this process leads
		// again in term 5. Before its first call writes anything, a
		// replica of term 4 still calling is refused.
		require.NoError(t, fence.Admit(4))
		mu.Lock()
		term = 5
		mu.Unlock()
		require.NoError(t, b.UpdateLoadBalancer(t.Context(), "c", svc, nodes(1)))
		got := ev.take()
		require.NotEmpty(t, got)
		require.Equal(t, "admit 5", got[0], "a new term raises the fence before it reads: %q", got)
		require.Error(t, fence.Admit(4), "the deposed term is fenced off before the new one wrote")

		require.Contains(t, first, "journal lb-1")
		require.NotContains(t, got, "journal lb-1", "the Service's reconciler is kept")
		load, list := slices.Index(got, "load lb-1"), slices.Index(got, "list")
		require.True(t, load > 0 && list > load, "the kept reconciler reads the journal again, after the fence went up and before it lists: %q", got)
	})
}

// A Balancer kept across terms learns again, in a new term, what its
// Service's load balancers are: term 3's replica built lb-1 and swept the
// rest; term 4's replica moved the Service to lb-2 and was deposed before
// it swept lb-1 (it destroyed its children only); term 5 is the first
// replica's again, whose mapping says
// lb-1 (the move was undone). It tears down lb-2, which it never saw,
// instead of trusting term 3's "nothing left elsewhere".
func TestKeptBalancerSweepsWhatAnotherTermLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := lbrecontest.New(lbrecontest.Config{Latency: 10 * time.Millisecond, Pending: time.Second, ListLag: time.Second,
			DeleteDelay: time.Second, Integrity: true})
		fence := lbrecon.NewFence("provider", 0, "")
		journal := &ccm.MemoryJournal{}
		replica := func(id string, token *atomic.Uint64) *ccm.Balancer {
			mm := &movingMapping{ids: map[string]string{"uid-1": id}}
			return newBalancer(t, eng, func(c *ccm.Config) {
				c.Mapping, c.Journal, c.Admit = mm.mapping(), journal, fence.Admit
				c.Token = func(context.Context) (uint64, error) { return token.Load(), nil }
			})
		}
		svc := service("uid-1")
		var termA, termB atomic.Uint64
		termA.Store(3)
		a := replica("lb-1", &termA)
		_, _, err := ensure(t, a, svc, nodes(2))
		require.NoError(t, err)
		for range 3 { // later syncs: the sweep of other IDs completes
			<-time.After(time.Second)
			_, err := a.EnsureLoadBalancer(t.Context(), "c", svc, nodes(2))
			require.NoError(t, err)
		}

		termB.Store(4)
		b := replica("lb-2", &termB)
		_, _, err = ensure(t, b, svc, nodes(2))
		require.NoError(t, err)
		<-time.After(2 * time.Second)
		require.NotEmpty(t, onBalancer(eng, "lb-1", "uid-1"))
		require.NotEmpty(t, onBalancer(eng, "lb-2", "uid-1"))

		termA.Store(5)
		_, _, err = ensure(t, a, svc, nodes(2)) // lb-1 again: term 4 began its sweep
		require.NoError(t, err)
		tearDownOld(t, a, eng, svc, "lb-2")
		require.Empty(t, onBalancer(eng, "lb-2", "uid-1"), "term 4's load balancer torn down")
		require.NotEmpty(t, onBalancer(eng, "lb-1", "uid-1"))
	})
}

// A deposed replica (another one raised the fence past its term after
// this Balancer began it) that gets its first call for a Service in that
// term reads nothing: the Service's new reconciler raises the fence
// itself (lbrecon.Config.Admit) before it reads the journal or lists, and
// is refused. The Balancer's own raise does not cover it: it raises once
// per term, before the other replica's. Without it, the deposed replica
// reads the journal and the provider, and writes what it can.
func TestDeposedReplicaReadsNothingForANewService(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev, eng, fence, admit := fenceEvents()
		b := newBalancer(t, listing{Engine: eng, ev: ev}, func(c *ccm.Config) {
			c.Admit, c.Journal = admit, opening{Journal: &ccm.MemoryJournal{}, ev: ev}
			c.Token = func(context.Context) (uint64, error) { return 3, nil }
		})
		_, _, err := ensure(t, b, service("uid-1"), nodes(1))
		require.NoError(t, err)
		ev.take()

		require.NoError(t, fence.Admit(4), "another replica's term")
		eng.ResetCalls()
		_, err = b.EnsureLoadBalancer(t.Context(), "c", service("uid-2"), nodes(1))
		require.ErrorIs(t, err, lbrecon.ErrFenced)
		got := ev.take()
		require.NotContains(t, got, "list", "the deposed replica listed: %q", got)
		require.False(t, slices.ContainsFunc(got, func(e string) bool { return len(e) > 5 && e[:5] == "load " }),
			"the deposed replica read the journal: %q", got)
		require.Zero(t, eng.TotalCalls(), "the deposed replica called the provider")
	})
}
