package ccm_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/cloud-provider/api"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// goneWatch counts the listings by the Service's tag and notes when the
// first one showed nothing with the tag.
type goneWatch struct {
	lbrecon.Engine
	tag string

	mu        sync.Mutex
	lists     int
	firstGone time.Time
}

func (g *goneWatch) List(ctx context.Context, q lbrecon.Query) ([]lbrecon.Object, error) {
	objs, err := g.Engine.List(ctx, q)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lists++
	if err == nil && q.Tag == g.tag && g.firstGone.IsZero() {
		n := 0
		for _, o := range objs {
			if o.HasTag(g.tag) {
				n++
			}
		}
		if n == 0 {
			g.firstGone = time.Now()
		}
	}
	return objs, err
}

func (g *goneWatch) ListLag() time.Duration { return g.Engine.(lbrecon.ListLagger).ListLag() }

func (g *goneWatch) ListLagListings() int { return g.Engine.(lbrecon.ListingLagger).ListLagListings() }

// reset forgets the listings seen so far.
func (g *goneWatch) reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lists, g.firstGone = 0, time.Time{}
}

func (g *goneWatch) counts() (int, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lists, g.firstGone
}

// deleteCall is one EnsureLoadBalancerDeleted call as the service
// controller made it.
type deleteCall struct {
	took  time.Duration
	lists int // provider listings during the call
	err   error
}

// deleteAsTheController calls EnsureLoadBalancerDeleted as the service
// controller's finalizer path does: it wraps the error with %v, so every
// error, a RetryError too, is retried after its exponential backoff (5 s,
// doubling; cloud-provider's minRetryDelay), until a call returns nil.
func deleteAsTheController(t *testing.T, b *ccm.Balancer, g *goneWatch, svc *v1.Service) []deleteCall {
	t.Helper()
	var calls []deleteCall
	backoff := 5 * time.Second
	for len(calls) < 20 {
		before, _ := g.counts()
		start := time.Now()
		err := b.EnsureLoadBalancerDeleted(t.Context(), "c", svc)
		after, _ := g.counts()
		calls = append(calls, deleteCall{took: time.Since(start), lists: after - before, err: err})
		if err == nil {
			return calls
		}
		var re *api.RetryError
		require.ErrorAs(t, err, &re, "call %d", len(calls))
		<-time.After(backoff)
		backoff *= 2
	}
	t.Fatalf("not deleted after %d calls", len(calls))
	return nil
}

// A delete whose teardown has nothing left but the confirmation of the
// destructions it sent waits for it inside the call, on the clock and
// within the declared lag and a poll, instead of returning a RetryError
// the service controller would answer with its next doubling of backoff:
// the call during which a listing first showed nothing of the Service's
// left is the one that returns nil. It never returns nil before that
// confirmation: a listing the lag after, and no journal entry left. Every
// earlier call makes its pass and returns without a wait on the clock.
func TestDeleteWaitsForTheConfirmationInsideTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lag = time.Second
		eng := lbrecontest.New(lbrecontest.Config{Latency: 10 * time.Millisecond, Pending: time.Second, ListLag: lag,
			DeclareListLag: true, DeleteDelay: time.Second, Integrity: true})
		svc := service("uid-1")
		g := &goneWatch{Engine: eng, tag: ccm.DefaultTagKey + "=uid-1"}
		journal := &ccm.MemoryJournal{}
		b := newBalancer(t, g, func(c *ccm.Config) { c.Journal, c.Reconciler = journal, lbrecon.Config{} })
		_, _, err := ensure(t, b, svc, nodes(2))
		require.NoError(t, err)
		g.reset()

		calls := deleteAsTheController(t, b, g, svc)
		_, firstGone := g.counts()
		require.False(t, firstGone.IsZero())
		last := calls[len(calls)-1]
		for i, c := range calls {
			t.Logf("call %d: %v, %d listings, %v", i+1, c.took, c.lists, c.err)
			if i < len(calls)-1 {
				require.LessOrEqual(t, c.took, 100*time.Millisecond, "call %d: no wait on the clock before the confirmation", i+1)
			}
		}
		require.Greater(t, len(calls), 2, "a teardown of three levels with asynchronous deletes takes several calls")
		require.GreaterOrEqual(t, time.Since(firstGone), lag, "done before a listing the lag after the first that showed nothing")
		require.Less(t, time.Since(firstGone), last.took, "the first listing that showed nothing was made by the last call: no call for the confirmation alone")
		require.LessOrEqual(t, last.took, lag+lbrecon.DefaultPollInterval+100*time.Millisecond, "the wait is within the lag and a poll")
		scopes, err := journal.Scopes(t.Context(), svc)
		require.NoError(t, err)
		require.Empty(t, scopes, "journal entries left")
		require.Empty(t, owned(eng, "uid-1"))
	})
}

// A negative TeardownWait waits for nothing: the confirmation takes a
// call of its own.
func TestDeleteWithNegativeTeardownWaitWaitsForNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := lbrecontest.New(lbrecontest.Config{Latency: 10 * time.Millisecond, Pending: time.Second, ListLag: time.Second,
			DeclareListLag: true, DeleteDelay: time.Second, Integrity: true})
		svc := service("uid-1")
		g := &goneWatch{Engine: eng, tag: ccm.DefaultTagKey + "=uid-1"}
		b := newBalancer(t, g, func(c *ccm.Config) { c.TeardownWait = -1 })
		_, _, err := ensure(t, b, svc, nodes(2))
		require.NoError(t, err)
		g.reset()
		calls := deleteAsTheController(t, b, g, svc)
		_, firstGone := g.counts()
		for i, c := range calls {
			require.LessOrEqual(t, c.took, 100*time.Millisecond, "call %d: no wait on the clock", i+1)
		}
		require.Greater(t, time.Since(firstGone), calls[len(calls)-1].took, "the confirmation took a call of its own")
		require.Empty(t, owned(eng, "uid-1"))
	})
}

// The wait for a confirmation ends within one Reconciler.CallTimeout of
// the call's start: a lag longer than that is answered with a RetryError
// whose delay is the time left to the confirmation, not a backoff; the
// call after it converges, not before the lag.
func TestDeleteConfirmationWaitEndsWithinCallTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lag, callTimeout = 10 * time.Second, 3 * time.Second
		eng := lbrecontest.New(lbrecontest.Config{Latency: 10 * time.Millisecond, ListLag: lag, DeclareListLag: true, Integrity: true})
		svc := service("uid-1")
		g := &goneWatch{Engine: eng, tag: ccm.DefaultTagKey + "=uid-1"}
		b := newBalancer(t, g, func(c *ccm.Config) { c.Reconciler = lbrecon.Config{CallTimeout: callTimeout} })
		_, _, err := ensure(t, b, svc, nodes(2))
		require.NoError(t, err)
		g.reset()
		for calls := 1; ; calls++ {
			require.Less(t, calls, 100)
			start := time.Now()
			err := b.EnsureLoadBalancerDeleted(t.Context(), "c", svc)
			require.LessOrEqual(t, time.Since(start), callTimeout, "call %d within CallTimeout", calls)
			_, firstGone := g.counts()
			var re *api.RetryError
			if !errors.As(err, &re) {
				require.NoError(t, err)
				require.False(t, firstGone.IsZero())
				require.GreaterOrEqual(t, time.Since(firstGone), lag, "done before the confirmation")
				break
			}
			if !firstGone.IsZero() {
				left := time.Until(firstGone.Add(lag))
				require.LessOrEqual(t, re.RetryAfter(), max(left, lbrecon.DefaultPollInterval), "call %d: the delay is the time left to the confirmation", calls)
			}
			<-time.After(re.RetryAfter())
		}
		require.Empty(t, owned(eng, "uid-1"))
	})
}

// forgetless is a journal whose Forget fails for ever: a teardown waits
// for its confirmation for ever.
type forgetless struct{ ccm.Journal }

func (f forgetless) For(svc *v1.Service, id string) lbrecon.Journal {
	return forgetlessScope{f.Journal.For(svc, id)}
}

type forgetlessScope struct{ lbrecon.Journal }

func (forgetlessScope) Forget(context.Context, []lbrecon.Intent) error {
	return fmt.Errorf("forget: %w", lbrecontest.ErrInjected)
}

// The wait for a confirmation does not spin. Against a provider whose lag
// is counted in listings (each listing answers at once, and only the
// 21st after a call must show it), a call waits for the confirmation
// listing at most once per PollInterval, within the lag and a poll.
// Against a journal whose Forget fails for ever (a teardown that waits
// for its confirmation for ever), no call waits: the failure comes back
// in the RetryError, whose delay grows, so that after 30 s of it the
// calls list at most once a second.
func TestDeleteConfirmationWaitDoesNotSpin(t *testing.T) {
	const poll = 100 * time.Millisecond
	t.Run("lag in listings", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			const listings = 20
			eng := lbrecontest.New(lbrecontest.Config{Latency: 10 * time.Millisecond, LagListings: listings, DeclareListLag: true, Integrity: true})
			svc := service("uid-1")
			g := &goneWatch{Engine: eng, tag: ccm.DefaultTagKey + "=uid-1"}
			b := newBalancer(t, g, func(c *ccm.Config) { c.Reconciler = lbrecon.Config{PollInterval: poll} })
			_, _, err := ensure(t, b, svc, nodes(2))
			require.NoError(t, err)
			g.reset()
			var waited time.Duration // the longest call
			for calls := 1; ; calls++ {
				require.Less(t, calls, 100)
				before, _ := g.counts()
				start := time.Now()
				err := b.EnsureLoadBalancerDeleted(t.Context(), "c", svc)
				took := time.Since(start)
				after, _ := g.counts()
				require.LessOrEqual(t, took, (listings+1)*poll+(listings+4)*10*time.Millisecond, "call %d: waited beyond the lag and a poll (and the latency of a listing per poll)", calls)
				// Two passes (the load balancer's, the rest's) and a
				// listing per poll of the wait.
				require.LessOrEqual(t, after-before, 2+int(took/poll), "call %d: %d listings in %v", calls, after-before, took)
				waited = max(waited, took)
				t.Logf("call %d: %v, %d listings, %v", calls, took, after-before, err)
				var re *api.RetryError
				if !errors.As(err, &re) {
					require.NoError(t, err)
					break
				}
				<-time.After(re.RetryAfter())
			}
			require.Greater(t, waited, listings*poll, "no call waited for the confirmation")
			require.Empty(t, owned(eng, "uid-1"))
		})
	})
	t.Run("journal fails to forget", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			eng := lbrecontest.New(lbrecontest.Config{Latency: 10 * time.Millisecond, ListLag: time.Second, DeclareListLag: true, Integrity: true})
			svc := service("uid-1")
			g := &goneWatch{Engine: eng, tag: ccm.DefaultTagKey + "=uid-1"}
			b := newBalancer(t, g, func(c *ccm.Config) {
				c.Journal, c.Reconciler = forgetless{&ccm.MemoryJournal{}}, lbrecon.Config{PollInterval: poll}
			})
			_, _, err := ensure(t, b, svc, nodes(2))
			require.NoError(t, err)
			start := time.Now()
			var late, failed int // listings after 30 s; calls that met the journal's failure
			for time.Since(start) < 3*time.Minute {
				before, _ := g.counts()
				callStart := time.Now()
				err := b.EnsureLoadBalancerDeleted(t.Context(), "c", svc)
				took := time.Since(callStart)
				after, _ := g.counts()
				var re *api.RetryError
				require.ErrorAs(t, err, &re, "converged with a journal that forgets nothing")
				if errors.Is(err, lbrecontest.ErrInjected) {
					failed++
					require.LessOrEqual(t, took, 100*time.Millisecond, "a call that met the journal's failure waits for nothing")
				}
				if time.Since(start) > 30*time.Second {
					late += after - before
				}
				<-time.After(re.RetryAfter())
			}
			perSecond := float64(late) / (time.Since(start) - 30*time.Second).Seconds()
			t.Logf("%d listings in the last %v of fake time: %.2f a second", late, time.Since(start)-30*time.Second, perSecond)
			require.Positive(t, failed, "no call met the journal's failure")
			require.LessOrEqual(t, perSecond, 1.0, "listings a second after 30 s of the same failure")
		})
	})
}

// The wait for a confirmation ends within the call's context: a call
// whose deadline comes before the confirmation does not wait, and
// returns the RetryError at once.
func TestDeleteConfirmationWaitEndsWithinTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lag = 2 * time.Second
		eng := lbrecontest.New(lbrecontest.Config{Latency: 10 * time.Millisecond, ListLag: lag, DeclareListLag: true, Integrity: true})
		svc := service("uid-1")
		g := &goneWatch{Engine: eng, tag: ccm.DefaultTagKey + "=uid-1"}
		b := newBalancer(t, g, func(c *ccm.Config) { c.Reconciler = lbrecon.Config{} })
		_, _, err := ensure(t, b, svc, nodes(2))
		require.NoError(t, err)
		g.reset()
		for calls := 1; ; calls++ {
			require.Less(t, calls, 100)
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			start := time.Now()
			err := b.EnsureLoadBalancerDeleted(ctx, "c", svc)
			cancel()
			require.LessOrEqual(t, time.Since(start), 100*time.Millisecond, "call %d waited past what its context allows", calls)
			var re *api.RetryError
			if !errors.As(err, &re) {
				require.NoError(t, err)
				_, firstGone := g.counts()
				require.GreaterOrEqual(t, time.Since(firstGone), lag, "done before the confirmation")
				break
			}
			<-time.After(re.RetryAfter())
		}
		require.Empty(t, owned(eng, "uid-1"))
	})
}
