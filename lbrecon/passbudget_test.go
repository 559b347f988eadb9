package lbrecon_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// Tests of the one-pass budget: every ReconcileOnce and TeardownOnce
// returns within one CallTimeout however long the provider takes, and a
// creation the pass's end cut short is held like one whose answer was
// lost: no duplicate, no ErrInconsistent.

const passTimeout = 5 * time.Second

// slowAnswers delays every answer of an instant engine by a duration the
// test sets per verb. Writes take effect at once and their answer comes
// late (a call cut short may have happened); a List is made once its
// delay passed. Every call ends with its context.
type slowAnswers struct {
	*lbrecontest.Engine
	list, write atomic.Int64 // delays, in nanoseconds
}

func (s *slowAnswers) wait(ctx context.Context, d *atomic.Int64) error {
	t := time.NewTimer(time.Duration(d.Load()))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (s *slowAnswers) List(ctx context.Context, q lbrecon.Query) ([]lbrecon.Object, error) {
	if err := s.wait(ctx, &s.list); err != nil {
		return nil, err
	}
	return s.Engine.List(ctx, q)
}

func (s *slowAnswers) Create(ctx context.Context, o lbrecon.Object) (lbrecon.Object, error) {
	got, err := s.Engine.Create(ctx, o)
	if werr := s.wait(ctx, &s.write); werr != nil {
		return lbrecon.Object{}, werr
	}
	return got, err
}

func (s *slowAnswers) CreateIdempotent(ctx context.Context, o lbrecon.Object, token string) (lbrecon.Object, error) {
	got, err := s.Engine.CreateIdempotent(ctx, o, token)
	if errors.Is(err, lbrecon.ErrNotSupported) {
		return got, err // nothing sent
	}
	if werr := s.wait(ctx, &s.write); werr != nil {
		return lbrecon.Object{}, werr
	}
	return got, err
}

func (s *slowAnswers) Destroy(ctx context.Context, o lbrecon.Object) error {
	err := s.Engine.Destroy(ctx, o)
	if werr := s.wait(ctx, &s.write); werr != nil {
		return werr
	}
	return err
}

func (s *slowAnswers) Update(ctx context.Context, cur, want lbrecon.Object) (lbrecon.Object, error) {
	got, err := s.Engine.Update(ctx, cur, want)
	if werr := s.wait(ctx, &s.write); werr != nil {
		return lbrecon.Object{}, werr
	}
	return got, err
}

func (s *slowAnswers) Tag(ctx context.Context, o lbrecon.Object, tags []string) error {
	err := s.Engine.Tag(ctx, o, tags)
	if werr := s.wait(ctx, &s.write); werr != nil {
		return werr
	}
	return err
}

func (s *slowAnswers) set(list, write time.Duration) {
	s.list.Store(int64(list))
	s.write.Store(int64(write))
}

// lagging is the provider of these tests: instant, with listings that lag
// writes by one listing (a lag with no time bound: unknown outcomes are
// held until a listing shows the object or ConfirmTimeout passes).
func lagging(idempotent bool) *slowAnswers {
	return &slowAnswers{Engine: lbrecontest.New(lbrecontest.Config{Pending: time.Second, LagListings: 1,
		DeleteDelay: 2 * time.Second, Integrity: true, UniqueBinds: true, Idempotency: idempotent})}
}

// duplicates counts the objects beyond the first of each kind and name.
func duplicates(eng *lbrecontest.Engine) int {
	names := map[string]int{}
	dups := 0
	for _, o := range eng.Objects() {
		names[o.Kind+"/"+o.Name]++
		if names[o.Kind+"/"+o.Name] > 1 {
			dups++
		}
	}
	return dups
}

// budgetRun calls once until it converges (at most calls times), failing
// the test if one call takes longer than passTimeout or reports
// ErrInconsistent, and returns whether it converged and whether a call
// reported a timeout. Each call's RequeueAfter is waited (synctest's
// clock).
func budgetRun(t *testing.T, calls int, once func(context.Context) (lbrecon.Result, error)) (converged, timedOut bool) {
	t.Helper()
	for n := 1; n <= calls; n++ {
		start := time.Now()
		res, err := once(t.Context())
		took := time.Since(start)
		require.LessOrEqual(t, took, passTimeout, "call %d took longer than one CallTimeout", n)
		require.NotErrorIs(t, err, lbrecon.ErrInconsistent)
		timedOut = timedOut || errors.Is(res.Transient, context.DeadlineExceeded)
		if err != nil {
			<-time.After(time.Second) // the host's error backoff
			continue
		}
		if res.Converged {
			return true, timedOut
		}
		require.Positive(t, res.RequeueAfter)
		<-time.After(res.RequeueAfter)
	}
	return false, timedOut
}

// Engine calls longer than the deadlines, in every combination that used
// to take a pass past CallTimeout (a List and a write of 0.6 CallTimeout
// each, writes of 1.5 CallTimeout, a List that leaves less than the
// floor): every ReconcileOnce and TeardownOnce returns within one
// CallTimeout. Cut-short writes happened at the provider: creations are
// held until a listing shows them, so the load balancer converges
// without a duplicate, with tokens or without, slow or fast again.
func TestReconcileOnceWithinOneCallTimeout(t *testing.T) {
	for _, tc := range []struct {
		name        string
		list, write time.Duration
		idempotent  bool
	}{
		{"list and write 0.6 CallTimeout", 3 * time.Second, 3 * time.Second, false},
		{"list and write 0.6 CallTimeout, tokens", 3 * time.Second, 3 * time.Second, true},
		{"writes 1.5 CallTimeout", 0, 7500 * time.Millisecond, false},
		{"writes 1.5 CallTimeout, tokens", 0, 7500 * time.Millisecond, true},
		{"list leaves less than the floor", 4800 * time.Millisecond, time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := lagging(tc.idempotent)
				eng.set(tc.list, tc.write)
				lb := desc(2, 2, 3)
				r := newLB(t, eng, lb, func(c *lbrecon.Config) { c.CallTimeout = passTimeout })

				// Slow: every call returns in time, with cut-short calls,
				// or none sent with less than the floor left.
				_, timedOut := budgetRun(t, 12, r.ReconcileOnce)
				if tc.list+passTimeout/10 > passTimeout {
					require.Zero(t, eng.Calls()[lbrecon.VerbCreate], "no call starts with less than the floor left")
				} else {
					require.True(t, timedOut, "calls were cut short")
				}
				require.Zero(t, duplicates(eng.Engine))

				// Fast again: converges without a duplicate.
				eng.set(0, 0)
				converged, _ := budgetRun(t, 60, r.ReconcileOnce)
				require.True(t, converged)
				require.Zero(t, duplicates(eng.Engine))
				requireConverged(t, eng.Engine, r, lb)

				// A node-port change and a teardown, slow then fast.
				lb.Ports[0].NodePort = 31000
				require.NoError(t, r.SetLoadBalancer(lb))
				for _, call := range []func(context.Context) (lbrecon.Result, error){r.ReconcileOnce, r.TeardownOnce} {
					eng.set(tc.list, tc.write)
					budgetRun(t, 6, call)
					eng.set(0, 0)
					converged, _ = budgetRun(t, 60, call)
					require.True(t, converged)
					require.Zero(t, duplicates(eng.Engine))
				}
				require.Empty(t, eng.Objects())
			})
		})
	}
}

// A provider answering 503 for 30 s, each answer after 0.6 CallTimeout:
// every call returns within one CallTimeout and the load balancer
// converges without a duplicate after the outage.
func TestReconcileOnceSlowOutageWithinOneCallTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := lagging(false)
		eng.set(3*time.Second, 3*time.Second)
		eng.Unavailable(30 * time.Second)
		lb := desc(2, 2, 3)
		r := newLB(t, eng, lb, func(c *lbrecon.Config) { c.CallTimeout = passTimeout })
		start := time.Now()
		budgetRun(t, 100, func(ctx context.Context) (lbrecon.Result, error) {
			if time.Since(start) > 30*time.Second {
				eng.set(0, 0)
			}
			return r.ReconcileOnce(ctx)
		})
		require.Zero(t, duplicates(eng.Engine))
		requireConverged(t, eng.Engine, r, lb)
	})
}

// Creations cut short by the pass's end that did happen, then a crash: the
// next process, with the file journal, holds them (one-listing lag, no
// ListLag) and creates none again.
func TestCrashAfterCutShortCreations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := lagging(false)
		eng.set(3*time.Second, 3*time.Second)
		lb := desc(2, 2, 3)
		path := filepath.Join(t.TempDir(), "lb-1.journal")
		process := func() *lbrecon.LoadBalancerReconciler {
			return newLB(t, eng, lb, func(c *lbrecon.Config) {
				c.CallTimeout, c.Journal = passTimeout, lbrecon.NewFileJournal(path)
			})
		}
		res, err := process().ReconcileOnce(t.Context())
		require.NoError(t, err)
		require.ErrorIs(t, res.Transient, context.DeadlineExceeded, "the creations were cut short")
		require.NotEmpty(t, eng.Objects(), "and happened")
		eng.set(0, 0)
		converged, _ := budgetRun(t, 60, process().ReconcileOnce)
		require.True(t, converged)
		require.Zero(t, duplicates(eng.Engine))
		requireConverged(t, eng.Engine, process(), lb)
	})
}
