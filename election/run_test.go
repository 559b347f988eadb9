package election_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/electiontest"
)

// recorder keeps the events of a test in order.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func (r *recorder) has(event string) func() bool {
	return func() bool { return slices.Contains(r.get(), event) }
}

// recElector records Resign calls, and fails the first failCampaigns
// Campaigns.
type recElector struct {
	election.Elector
	e             *electiontest.Election
	rec           *recorder
	failCampaigns atomic.Int32
	campaigns     atomic.Int32
}

func (r *recElector) Campaign(ctx context.Context) (election.Leadership, error) {
	r.campaigns.Add(1)
	if r.failCampaigns.Add(-1) >= 0 {
		return nil, errors.New("backend unreachable")
	}
	l, err := r.Elector.Campaign(ctx)
	if err != nil {
		return nil, err
	}
	return &recLeadership{Leadership: l, r: r}, nil
}

type recLeadership struct {
	election.Leadership
	r *recElector
}

func (l *recLeadership) Resign(ctx context.Context) error {
	l.r.rec.add("resign: term live=%v", l.Context().Err() == nil)
	err := l.Leadership.Resign(ctx)
	l.r.rec.add("released: term live=%v leader=%q", l.Context().Err() == nil, l.r.e.Leader().Identity)
	return err
}

func newRec(opts ...electiontest.Option) (*electiontest.Election, *recElector) {
	e := electiontest.NewElection(opts...)
	return e, &recElector{Elector: e.NewCandidate("a"), e: e, rec: &recorder{}}
}

// blockingLead records its steps, waits for its context, then for proceed.
func blockingLead(rec *recorder, proceed <-chan struct{}) func(context.Context, election.Leadership) error {
	return func(ctx context.Context, l election.Leadership) error {
		rec.add("lead start: token %d", l.Token())
		<-ctx.Done()
		rec.add("lead ctx done: %v; term live=%v", context.Cause(ctx), l.Context().Err() == nil)
		<-proceed
		rec.add("lead returns")
		return ctx.Err()
	}
}

func runAsync(ctx context.Context, e election.Elector, lead func(context.Context, election.Leadership) error, opts ...election.RunOption) <-chan error {
	done := make(chan error, 1)
	go func() { done <- election.Run(ctx, e, lead, opts...) }()
	return done
}

func waitDone(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		require.FailNow(t, "Run did not return")
		return nil
	}
}

const waitFor, tick = 10 * time.Second, time.Millisecond

// stepUntil steps fc by d whenever something waits on it until cond holds,
// for at most a minute of real time. Unlike a fixed number of steps, it
// cannot run out of steps when one lands before the waiter it was meant
// for is armed (a FakeClock counts the waiters of abandoned After calls).
func stepUntil(t *testing.T, fc *clocktesting.FakeClock, d time.Duration, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		if cond() {
			return true
		}
		if fc.HasWaiters() {
			fc.Step(d)
		}
		return false
	}, time.Minute, tick, "%s", what)
}

func TestRunReleaseOrderOnCancel(t *testing.T) {
	e, c := newRec()
	proceed := make(chan struct{})
	close(proceed)
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, c, blockingLead(c.rec, proceed))
	require.Eventually(t, c.rec.has("lead start: token 1"), waitFor, tick)
	require.Equal(t, "a", e.Leader().Identity)

	cancel()
	require.NoError(t, waitDone(t, done), "Run must return nil when its context ends")
	require.Equal(t, []string{
		"lead start: token 1",
		"lead ctx done: context canceled; term live=true",
		"lead returns",
		"resign: term live=true",
		`released: term live=false leader=""`,
	}, c.rec.get())
}

func TestRunHoldsLeadershipUntilLateLeadReturns(t *testing.T) {
	e, c := newRec()
	fc := clocktesting.NewFakeClock(time.Now())
	var logged atomic.Int32
	log := funcr.New(func(_, args string) { logged.Add(1) }, funcr.Options{})
	proceed := make(chan struct{})
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), log))
	done := runAsync(ctx, c, blockingLead(c.rec, proceed),
		election.WithRunClock(fc), election.WithLeadReturnTimeout(time.Second))
	require.Eventually(t, c.rec.has("lead start: token 1"), waitFor, tick)

	cancel()
	require.Eventually(t, c.rec.has("lead ctx done: context canceled; term live=true"), waitFor, tick)
	before := logged.Load()
	stepUntil(t, fc, time.Second, "late lead logged twice", func() bool { return logged.Load() >= before+2 })
	require.Equal(t, "a", e.Leader().Identity, "released while lead still ran")
	select {
	case err := <-done:
		require.FailNow(t, "Run returned before lead", "%v", err)
	default:
	}

	close(proceed)
	require.NoError(t, waitDone(t, done), "Run must return nil when its context ends")
	require.Equal(t, []string{
		"lead start: token 1",
		"lead ctx done: context canceled; term live=true",
		"lead returns",
		"resign: term live=true",
		`released: term live=false leader=""`,
	}, c.rec.get())
}

func TestRunCampaignsAgainAfterLoss(t *testing.T) {
	e, c := newRec()
	proceed := make(chan struct{})
	close(proceed)
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, c, blockingLead(c.rec, proceed))
	require.Eventually(t, c.rec.has("lead start: token 1"), waitFor, tick)

	require.True(t, e.Depose())
	require.Eventually(t, c.rec.has("lead start: token 2"), waitFor, tick)
	cancel()
	require.NoError(t, waitDone(t, done), "Run must return nil when its context ends")
	events := c.rec.get()
	require.Equal(t, []string{
		"lead start: token 1",
		"lead ctx done: election: leadership lost: deposed by the test; term live=false",
		"lead returns",
		"resign: term live=false",
		`released: term live=false leader=""`,
		"lead start: token 2",
	}, events[:6])
}

func TestRunLeadErrorBacksOffThenCampaignsAgain(t *testing.T) {
	e, c := newRec()
	fc := clocktesting.NewFakeClock(time.Now())
	var calls atomic.Int32
	boom := errors.New("boom")
	lead := func(ctx context.Context, l election.Leadership) error {
		if calls.Add(1) == 1 {
			return boom
		}
		<-ctx.Done()
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, c, lead, election.WithRunClock(fc), election.WithRetryJitter(0),
		election.WithRetryInterval(time.Second, time.Minute))
	require.Eventually(t, fc.HasWaiters, waitFor, tick)
	require.Equal(t, int32(1), calls.Load())
	require.True(t, e.Leader().IsZero(), "released after the failed lead")
	fc.Step(999 * time.Millisecond)
	require.Equal(t, int32(1), c.campaigns.Load(), "campaigned before the backoff ended")
	fc.Step(time.Millisecond)
	require.Eventually(t, func() bool { return calls.Load() == 2 }, waitFor, tick)
	require.Equal(t, "a", e.Leader().Identity)
	cancel()
	require.NoError(t, waitDone(t, done), "Run must return nil when its context ends")
	require.True(t, e.Leader().IsZero())
}

func TestRunStopOnError(t *testing.T) {
	e, c := newRec()
	boom := errors.New("boom")
	err := election.Run(context.Background(), c, func(context.Context, election.Leadership) error { return boom },
		election.WithStopOnError())
	require.ErrorIs(t, err, boom)
	require.True(t, e.Leader().IsZero(), "released before returning")
	require.Equal(t, []string{"resign: term live=true", `released: term live=false leader=""`}, c.rec.get())
}

func TestRunRetriesFailedCampaigns(t *testing.T) {
	_, c := newRec()
	c.failCampaigns.Store(2)
	fc := clocktesting.NewFakeClock(time.Now())
	proceed := make(chan struct{})
	close(proceed)
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, c, blockingLead(c.rec, proceed), election.WithRunClock(fc), election.WithRetryJitter(0))
	for _, d := range []time.Duration{100 * time.Millisecond, 150 * time.Millisecond} {
		require.Eventually(t, fc.HasWaiters, waitFor, tick)
		fc.Step(d)
	}
	require.Eventually(t, c.rec.has("lead start: token 1"), waitFor, tick)
	require.Equal(t, int32(3), c.campaigns.Load())
	cancel()
	require.NoError(t, waitDone(t, done), "Run must return nil when its context ends")
}

type closedElector struct{ election.Elector }

func (closedElector) Campaign(context.Context) (election.Leadership, error) {
	return nil, fmt.Errorf("campaign: %w", election.ErrClosed)
}

func TestRunStopsWhenElectorClosed(t *testing.T) {
	e := electiontest.NewElection()
	err := election.Run(context.Background(), closedElector{e.NewCandidate("a")},
		func(context.Context, election.Leadership) error { return nil })
	require.ErrorIs(t, err, election.ErrClosed)
}

func TestRunCancelledWhileCampaigning(t *testing.T) {
	e := electiontest.NewElection()
	other := e.NewCandidate("other")
	lo, err := other.Campaign(context.Background())
	require.NoError(t, err)
	c := e.NewCandidate("a")
	ctx, cancel := context.WithCancel(context.Background())
	var called atomic.Bool
	done := runAsync(ctx, c, func(context.Context, election.Leadership) error { called.Store(true); return nil })
	require.Eventually(t, func() bool { return len(e.Waiting()) == 1 }, waitFor, tick)
	cancel()
	require.NoError(t, waitDone(t, done), "Run must return nil when its context ends")
	require.False(t, called.Load())
	require.Empty(t, e.Waiting())
	require.NoError(t, lo.Resign(context.Background()))
	require.True(t, e.Leader().IsZero())
}

func TestRunInvalidOptions(t *testing.T) {
	e := electiontest.NewElection()
	c := e.NewCandidate("a")
	lead := func(context.Context, election.Leadership) error { return nil }
	for _, opt := range []election.RunOption{
		election.WithLeadReturnTimeout(0),
		election.WithReleaseTimeout(-1),
		election.WithRetryInterval(0, time.Second),
		election.WithRetryJitter(2),
	} {
		require.ErrorIs(t, election.Run(context.Background(), c, lead, opt), election.ErrInvalidRunOption)
	}
	require.ErrorIs(t, election.Run(context.Background(), c, nil), election.ErrInvalidRunOption)
	require.Empty(t, e.Waiting())
}

// A lead that returns nil at once must not make Run spin through terms:
// every such term is followed by a pause on Run's clock, growing by half.
func TestRunPausesAfterLeadReturnsNil(t *testing.T) {
	e, c := newRec()
	fc := clocktesting.NewFakeClock(time.Now())
	var terms atomic.Int32
	lead := func(context.Context, election.Leadership) error {
		terms.Add(1)
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, c, lead, election.WithRunClock(fc), election.WithRetryJitter(0),
		election.WithRetryInterval(time.Second, 2*time.Second))
	for i, pause := range []time.Duration{time.Second, 1500 * time.Millisecond, 2 * time.Second, 2 * time.Second} {
		require.Eventually(t, fc.HasWaiters, waitFor, tick, "no pause after term %d", i+1)
		require.Equal(t, int32(i+1), terms.Load(), "terms before pause %d", i+1)
		require.True(t, e.Leader().IsZero(), "released before the pause")
		fc.Step(pause - time.Millisecond)
		require.Equal(t, int32(i+1), terms.Load(), "campaigned before the pause ended")
		fc.Step(time.Millisecond)
		require.Eventually(t, func() bool { return terms.Load() == int32(i+2) }, waitFor, tick)
	}
	cancel()
	require.NoError(t, waitDone(t, done), "Run must return nil when its context ends")
}

// A lead that resigns at once, or whose term the backend ends at once, must
// not make Run spin either: the term ends with ErrResigned (or a loss), not
// with lead's nil, and is followed by the same growing pause. 200 ms of
// fake time hold a handful of terms, not tens of thousands.
func TestRunPausesAfterLeadResigns(t *testing.T) {
	for name, lead := range map[string]func(context.Context, election.Leadership) error{
		"resign": func(ctx context.Context, l election.Leadership) error {
			_ = l.Resign(ctx)
			return nil
		},
		"resign and report the end": func(ctx context.Context, l election.Leadership) error {
			_ = l.Resign(ctx)
			<-ctx.Done()
			return ctx.Err()
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, c := newRec()
			fc := clocktesting.NewFakeClock(time.Now())
			var terms atomic.Int32
			counted := func(ctx context.Context, l election.Leadership) error {
				terms.Add(1)
				return lead(ctx, l)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := runAsync(ctx, c, counted, election.WithRunClock(fc), election.WithRetryJitter(0),
				election.WithRetryInterval(100*time.Millisecond, time.Second))
			// Pauses of 100, 150 and 225 ms: two terms in the first 200 ms of
			// fake time (three at most, if a step lands on a lead's own
			// timer), and no more however long real time runs. A step can
			// land before Run arms its pause (a FakeClock counts the waiters
			// of abandoned After calls too), which only makes fewer terms:
			// the bound from above holds after exactly 200 ms, and Run is
			// then shown to go on by stepping until the second term.
			for range 20 {
				require.Eventually(t, fc.HasWaiters, waitFor, tick, "no pause after term %d", terms.Load())
				fc.Step(10 * time.Millisecond)
			}
			require.LessOrEqual(t, terms.Load(), int32(3), "terms in 200 ms of fake time")
			stepUntil(t, fc, 10*time.Millisecond, "a second term", func() bool { return terms.Load() >= 2 })
			cancel()
			require.NoError(t, waitDone(t, done))
		})
	}
}

// Close of the elector while lead runs ends lead's context at once, but
// the term is released only by Run's Resign, after lead returned; then
// Run ends with ErrClosed.
func TestRunCloseReleasesOnlyAfterLeadReturns(t *testing.T) {
	e, c := newRec()
	proceed := make(chan struct{})
	done := runAsync(context.Background(), c, blockingLead(c.rec, proceed))
	require.Eventually(t, c.rec.has("lead start: token 1"), waitFor, tick)

	require.NoError(t, c.Elector.(*electiontest.Candidate).Close())
	require.Eventually(t, c.rec.has("lead ctx done: election: elector closed; term live=false"), waitFor, tick)
	require.Equal(t, "a", e.Leader().Identity, "Close released the term while lead still ran")

	close(proceed)
	require.ErrorIs(t, waitDone(t, done), election.ErrClosed)
	require.Equal(t, []string{
		"lead start: token 1",
		"lead ctx done: election: elector closed; term live=false",
		"lead returns",
		"resign: term live=false",
		`released: term live=false leader=""`,
	}, c.rec.get())
}
