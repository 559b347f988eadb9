package electiontest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/election"
)

// Subject is one fresh, empty election of the backend under test.
type Subject struct {
	// NewCandidate joins a new candidate, with its own unique identity, to
	// this election. It registers the candidate's cleanup with t.Cleanup.
	// Required.
	NewCandidate func(t *testing.T) election.Elector

	// KillSession makes c lose its current term the way a crashed or
	// partitioned process does: the session, lease or record behind the
	// term dies or is taken over without a graceful release (for etcd,
	// revoke the session's lease from another client; for a Lease, let
	// it expire or overwrite it). It returns once the server side is done;
	// c's term context must then end with a cause wrapping
	// election.ErrLeadershipLost within Timeout, and c must be able to
	// campaign again. c is a value NewCandidate returned. Required.
	KillSession func(t *testing.T, c election.Elector)

	// Partition cuts c off from the backend without telling it: a cut
	// proxy in front of its client for a real backend (bytes held, not
	// refused, as on a real network), Candidate.Partition for the fake.
	// While cut, c's term must end on its own (its validity expires) and
	// another candidate may take over. It returns heal, which restores the
	// traffic; after heal c must be able to campaign again. c is a value
	// NewCandidate returned. Optional: without it the partition cases are
	// skipped and MutualExclusion ends terms only by Resign and
	// KillSession.
	Partition func(t *testing.T, c election.Elector) (heal func())

	// Timeout bounds every wait for something that must happen: a
	// campaign winning after a release, a term noticing its loss, Observe
	// catching up. Zero means 10 seconds. Backends whose loss detection
	// waits out a lease duration should set it above that duration.
	Timeout time.Duration
}

// Run runs the conformance suite every election.Elector passes, each case
// as a subtest on a fresh election from newSubject.
//
// Overlap is judged from each holder's own view, never from a Leader
// request: the moment a candidate's Campaign returns, every earlier term
// must have ended by its holder's own account, that is, its term context
// has ended or, for a term that implements election.Expiring, the clock
// is past its ValidUntil. The cases:
//   - MutualExclusion: candidates race through terms that end by Resign,
//     by KillSession and (with Partition) by a partition while another
//     candidate takes over; no term begins while an earlier one is still
//     valid by its holder's view, and tokens increase in term order. A
//     term ended by KillSession is exempt from the overlap check (it is
//     ended from outside, which its holder cannot foresee) but must end
//     within Timeout;
//   - HandoverOnResign: Resign ends the term context with cause
//     election.ErrResigned and a waiting candidate wins;
//   - LossOnSessionDeath: a killed session ends the term context with cause
//     election.ErrLeadershipLost, a waiting candidate wins, and the loser
//     can campaign again;
//   - LossByPartition (with Partition): a leader cut off from the backend
//     loses its term by expiry with cause election.ErrLeadershipLost while
//     a waiting candidate takes over, the successor begins only after the
//     old term ended by its holder's view, and the healed loser can
//     campaign again;
//   - CampaignContextCancelled: a cancelled Campaign returns an error
//     wrapping the context's error and never leads later;
//   - CampaignContextBoundsWaitOnly: ending the Campaign's context after
//     Campaign returned leaves the term live and held (so a holder can
//     release strictly after its own work returned); Resign then hands
//     over;
//   - TokensIncrease: tokens strictly increase over terms, whoever holds
//     them, and Leader reports the leader's identity and token;
//   - ObserveFinalState: Observe starts with the current state, reports
//     "no leader", and after a burst of changes delivers the final one;
//   - CampaignWhileLeading: a second Campaign on a leading candidate fails
//     and does not disturb the term;
//   - CurrentTerm (for a candidate that is an election.TermHolder, as
//     every reconkit elector is): Current reports no term before the
//     first, the very term Campaign returned while it is live, and no term
//     once it was resigned or lost; after a new Campaign, the new term;
//   - CloseLeavesReleaseToHolder (for a candidate that is an io.Closer, as
//     every reconkit elector is): Close ends the term context at once with
//     cause election.ErrClosed, but the term is not released behind its
//     holder's back: another candidate still sees it lead and does not win
//     until the holder's Resign; later Campaigns return
//     election.ErrClosed.
func Run(t *testing.T, newSubject func(t *testing.T) Subject) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(t *testing.T, s *suite)
	}{
		{"MutualExclusion", testMutualExclusion},
		{"HandoverOnResign", testHandoverOnResign},
		{"LossOnSessionDeath", testLossOnSessionDeath},
		{"LossByPartition", testLossByPartition},
		{"CampaignContextCancelled", testCampaignContextCancelled},
		{"CampaignContextBoundsWaitOnly", testCampaignContextBoundsWaitOnly},
		{"TokensIncrease", testTokensIncrease},
		{"ObserveFinalState", testObserveFinalState},
		{"CampaignWhileLeading", testCampaignWhileLeading},
		{"CloseLeavesReleaseToHolder", testCloseLeavesReleaseToHolder},
		{"CurrentTerm", testCurrentTerm},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sub := newSubject(t)
			require.NotNil(t, sub.NewCandidate, "Subject.NewCandidate")
			require.NotNil(t, sub.KillSession, "Subject.KillSession")
			if sub.Timeout <= 0 {
				sub.Timeout = 10 * time.Second
			}
			c.fn(t, &suite{Subject: sub})
		})
	}
}

type suite struct {
	Subject
}

// ctx returns a context for the test that ends at cleanup.
func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

type campaignResult struct {
	l   election.Leadership
	err error
}

// campaign starts c.Campaign in a goroutine. At cleanup, which runs
// before the candidates' own, a Campaign still waiting is cancelled and
// waited for, within Timeout: a case that failed with a Campaign pending
// ends instead of waiting for a win that will not come.
func (s *suite) campaign(t *testing.T, ctx context.Context, c election.Elector) <-chan campaignResult {
	ch := make(chan campaignResult, 1)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l, err := c.Campaign(cctx)
		ch <- campaignResult{l, err}
	}()
	t.Cleanup(func() {
		cancel() // bounds the wait only: a term already won outlives it
		select {
		case <-done:
		case <-time.After(s.Timeout):
			t.Errorf("%s: Campaign did not return within %v of its context ending", c.Identity(), s.Timeout)
		}
	})
	return ch
}

// close calls c.Close and returns its error, failing the test if Close
// does not return within Timeout (one that waits for a term it failed to
// end, say) instead of hanging the test binary.
func (s *suite) close(t *testing.T, c io.Closer, what string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(s.Timeout):
		require.FailNow(t, "timed out", "%s: Close did not return within %v", what, s.Timeout)
		return nil
	}
}

// bounded returns a child of ctx that ends after Timeout, for a single
// request of the suite (Leader, a Campaign that must fail at once).
func (s *suite) bounded(t *testing.T, ctx context.Context) context.Context {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// win waits for a campaign to succeed.
func (s *suite) win(t *testing.T, ch <-chan campaignResult, what string) election.Leadership {
	t.Helper()
	select {
	case r := <-ch:
		require.NoError(t, r.err, "%s: Campaign", what)
		require.NotNil(t, r.l, "%s: Campaign returned no leadership", what)
		require.NoError(t, r.l.Context().Err(), "%s: Campaign returned an ended term", what)
		return r.l
	case <-time.After(s.Timeout):
		require.FailNow(t, "timed out", "%s: Campaign did not win within %v", what, s.Timeout)
		return nil
	}
}

// lead campaigns and waits for the win.
func (s *suite) lead(t *testing.T, ctx context.Context, c election.Elector, what string) election.Leadership {
	t.Helper()
	return s.win(t, s.campaign(t, ctx, c), what)
}

// ended waits for a term context to end and returns its cause.
func (s *suite) ended(t *testing.T, l election.Leadership, what string) error {
	t.Helper()
	select {
	case <-l.Context().Done():
		return context.Cause(l.Context())
	case <-time.After(s.Timeout):
		require.FailNow(t, "timed out", "%s: term context did not end within %v", what, s.Timeout)
		return nil
	}
}

// pending asserts that a campaign has not returned yet.
func pending(t *testing.T, ch <-chan campaignResult, what string) {
	t.Helper()
	select {
	case r := <-ch:
		require.FailNow(t, "campaign returned early", "%s: Campaign returned (%v, %v) while another candidate led", what, r.l, r.err)
	default:
	}
}

// resign resigns with a bounded context.
func (s *suite) resign(t *testing.T, l election.Leadership) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), s.Timeout)
	defer cancel()
	require.NoError(t, l.Resign(ctx), "Resign")
}

// validView reports whether l is valid at now by its holder's own view:
// its context is live and, if it expires, now is before its ValidUntil.
func validView(l election.Leadership, now time.Time) bool {
	if l.Context().Err() != nil {
		return false
	}
	if x, ok := l.(election.Expiring); ok {
		return now.Before(x.ValidUntil())
	}
	return true
}

// judge records every term in the order their Campaigns returned and
// checks, at each new term's start, that every earlier term has ended by
// its holder's view, and that tokens increase.
type judge struct {
	mu         sync.Mutex
	terms      []election.Leadership
	exempt     map[election.Leadership]bool
	violations []string
}

// exclude exempts l from the overlap check: KillSession ends a term from
// outside (another client revokes or overwrites it), which no holder can
// foresee, so a successor may begin before the holder hears of it. The
// holder must still notice within Timeout, which the callers check.
func (j *judge) exclude(l election.Leadership) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.exempt == nil {
		j.exempt = map[election.Leadership]bool{}
	}
	j.exempt[l] = true
}

// began records l, whose Campaign has just returned.
func (j *judge) began(l election.Leadership) {
	now := time.Now()
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, p := range j.terms {
		if !j.exempt[p] && validView(p, now) {
			until := "no ValidUntil"
			if x, ok := p.(election.Expiring); ok {
				until = fmt.Sprintf("ValidUntil %v later", x.ValidUntil().Sub(now))
			}
			j.violations = append(j.violations, fmt.Sprintf(
				"term %d of %s began while term %d of %s was still valid by its holder's view (context live, %s)",
				l.Token(), l.Identity(), p.Token(), p.Identity(), until))
		}
	}
	if n := len(j.terms); n > 0 && l.Token() <= j.terms[n-1].Token() {
		j.violations = append(j.violations, fmt.Sprintf("term of %s has token %d, not above the previous term's %d",
			l.Identity(), l.Token(), j.terms[n-1].Token()))
	}
	j.terms = append(j.terms, l)
}

// check fails t on any violation.
func (j *judge) check(t *testing.T) {
	t.Helper()
	j.mu.Lock()
	defer j.mu.Unlock()
	require.Empty(t, j.violations, "overlapping terms")
}

// held is a term a candidate of MutualExclusion holds until told to resign
// or until it ends.
type held struct {
	c      election.Elector
	l      election.Leadership
	resign chan struct{}
}

func testMutualExclusion(t *testing.T, s *suite) {
	const candidates = 3
	ctx := s.ctx(t)
	actions := []string{"resign", "kill", "resign", "kill", "resign"}
	if s.Partition != nil {
		actions = append(actions, "partition", "resign", "partition", "kill")
	}
	var j judge
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	wins := make(chan held)
	cuts := make([]atomic.Int64, candidates) // odd while the candidate is cut off
	cands := make([]election.Elector, candidates)
	errs := make(chan error, candidates)
	var wg sync.WaitGroup
	for i := range candidates {
		c := s.NewCandidate(t)
		cands[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.holdTerms(ctx, runCtx, c, &cuts[i], &j, wins)
		}()
	}
	t.Cleanup(func() { stop(); wg.Wait() })
	index := func(c election.Elector) int {
		for i, x := range cands {
			if x == c {
				return i
			}
		}
		return -1
	}

	var heal func()
	cut := -1
	for n, action := range append(actions, "resign") {
		h := s.nextWin(t, wins, fmt.Sprintf("term %d", n))
		if heal != nil {
			// A successor took over while the previous holder was cut off.
			require.NotEqual(t, cut, index(h.c), "the cut-off candidate won again")
			heal()
			cuts[cut].Add(1)
			heal, cut = nil, -1
		}
		switch action {
		case "resign":
			close(h.resign)
		case "kill":
			j.exclude(h.l)
			s.KillSession(t, h.c)
			require.ErrorIs(t, s.ended(t, h.l, fmt.Sprintf("term %d after KillSession", n)), election.ErrLeadershipLost)
		case "partition":
			cut = index(h.c)
			cuts[cut].Add(1)
			heal = s.Partition(t, h.c)
			require.ErrorIs(t, s.ended(t, h.l, fmt.Sprintf("term %d after a partition", n)), election.ErrLeadershipLost)
		}
	}
	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	j.check(t)
	require.GreaterOrEqual(t, len(j.terms), len(actions)+1)
}

// holdTerms campaigns on c until runCtx ends, reports each term to j and on
// wins, and holds it until told to resign or until it ends. A Campaign
// error is tolerated while c is or was just cut off (cut changed or is
// odd); any other is returned.
func (s *suite) holdTerms(ctx, runCtx context.Context, c election.Elector, cut *atomic.Int64, j *judge, wins chan<- held) error {
	for {
		before := cut.Load()
		l, err := c.Campaign(runCtx)
		if err != nil {
			if runCtx.Err() != nil {
				return nil
			}
			if after := cut.Load(); before%2 == 1 || after != before {
				continue // cut off during the campaign: try again
			}
			return fmt.Errorf("%s: Campaign: %w", c.Identity(), err)
		}
		j.began(l)
		h := held{c: c, l: l, resign: make(chan struct{})}
		select {
		case wins <- h:
		case <-runCtx.Done():
		}
		select {
		case <-h.resign:
		case <-l.Context().Done():
			continue // lost: campaign again
		case <-runCtx.Done():
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.Timeout)
		err = l.Resign(rctx)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: Resign: %w", c.Identity(), err)
		}
	}
}

// nextWin waits for the next term of MutualExclusion.
func (s *suite) nextWin(t *testing.T, wins <-chan held, what string) held {
	t.Helper()
	select {
	case h := <-wins:
		return h
	case <-time.After(s.Timeout):
		require.FailNow(t, "timed out", "%s: no candidate won within %v", what, s.Timeout)
		return held{}
	}
}

func testHandoverOnResign(t *testing.T, s *suite) {
	ctx := s.ctx(t)
	a, b := s.NewCandidate(t), s.NewCandidate(t)
	require.NotEqual(t, a.Identity(), b.Identity(), "identities of two candidates")
	la := s.lead(t, ctx, a, "a")
	require.Equal(t, a.Identity(), la.Identity())

	chB := s.campaign(t, ctx, b)
	s.eventuallyLeader(t, ctx, b, a.Identity())
	pending(t, chB, "b")

	s.resign(t, la)
	require.ErrorIs(t, context.Cause(la.Context()), election.ErrResigned)
	lb := s.win(t, chB, "b after a resigned")
	require.Equal(t, b.Identity(), lb.Identity())
	require.Greater(t, lb.Token(), la.Token())
	s.eventuallyLeader(t, ctx, a, b.Identity())
	require.NoError(t, la.Resign(ctx), "Resign after the term ended")
	require.NoError(t, lb.Context().Err(), "b's term after a's second Resign")
	s.resign(t, lb)
}

func testLossOnSessionDeath(t *testing.T, s *suite) {
	ctx := s.ctx(t)
	a, b := s.NewCandidate(t), s.NewCandidate(t)
	la := s.lead(t, ctx, a, "a")
	chB := s.campaign(t, ctx, b)
	s.eventuallyLeader(t, ctx, b, a.Identity())

	s.KillSession(t, a)
	cause := s.ended(t, la, "a after its session was killed")
	require.ErrorIs(t, cause, election.ErrLeadershipLost)
	lb := s.win(t, chB, "b after a's session died")
	require.Greater(t, lb.Token(), la.Token())

	// The loser campaigns again and wins after b resigns.
	chA := s.campaign(t, ctx, a)
	s.resign(t, lb)
	la2 := s.win(t, chA, "a again")
	require.Greater(t, la2.Token(), lb.Token())
	s.resign(t, la2)
}

func testCurrentTerm(t *testing.T, s *suite) {
	c := s.NewCandidate(t)
	h, ok := c.(election.TermHolder)
	if !ok {
		t.Skip("the candidate is not an election.TermHolder")
	}
	ctx := s.ctx(t)
	requireNoCurrent := func(what string) {
		t.Helper()
		l, ok := h.Current()
		require.False(t, ok, "Current %s", what)
		require.Nil(t, l, "Current %s", what)
	}
	requireCurrent := func(want election.Leadership, what string) {
		t.Helper()
		l, ok := h.Current()
		require.True(t, ok, "Current %s", what)
		require.Equal(t, want.Token(), l.Token(), "Current's token %s", what)
		require.Equal(t, want.Context(), l.Context(), "Current's context %s", what)
		require.Equal(t, c.Identity(), l.Identity(), "Current's identity %s", what)
	}
	requireNoCurrent("before any term")
	l1 := s.lead(t, ctx, c, "the candidate")
	requireCurrent(l1, "while the first term is live")
	s.resign(t, l1)
	requireNoCurrent("after Resign")

	l2 := s.lead(t, ctx, c, "the candidate again")
	require.Greater(t, l2.Token(), l1.Token())
	requireCurrent(l2, "in the second term")
	s.KillSession(t, c)
	cause := s.ended(t, l2, "the second term after its session was killed")
	require.ErrorIs(t, cause, election.ErrLeadershipLost)
	requireNoCurrent("after the term was lost")
	require.NoError(t, l2.Resign(ctx), "Resign after the loss")
}

func testLossByPartition(t *testing.T, s *suite) {
	if s.Partition == nil {
		t.Skip("the Subject cannot partition a candidate (Subject.Partition is nil)")
	}
	ctx := s.ctx(t)
	var j judge
	a, b := s.NewCandidate(t), s.NewCandidate(t)
	la := s.lead(t, ctx, a, "a")
	j.began(la)
	chB := s.campaign(t, ctx, b)
	s.eventuallyLeader(t, ctx, b, a.Identity())
	pending(t, chB, "b")

	heal := s.Partition(t, a)
	healed := false
	defer func() {
		if !healed {
			heal()
		}
	}()
	lb := s.win(t, chB, "b after a was cut off")
	j.began(lb) // a's term must have ended by a's own view by now
	cause := s.ended(t, la, "a after it was cut off")
	require.ErrorIs(t, cause, election.ErrLeadershipLost)
	j.check(t)
	require.NoError(t, lb.Context().Err(), "b's term after a noticed its loss")

	// Healed, the loser campaigns again and wins after b resigns.
	heal()
	healed = true
	chA := s.campaign(t, ctx, a)
	s.resign(t, lb)
	la2 := s.win(t, chA, "a again after the partition healed")
	j.began(la2)
	j.check(t)
	s.resign(t, la2)
}

func testCampaignContextCancelled(t *testing.T, s *suite) {
	ctx := s.ctx(t)
	a, b := s.NewCandidate(t), s.NewCandidate(t)

	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err := b.Campaign(done)
	require.ErrorIs(t, err, context.Canceled, "Campaign with an ended context")

	la := s.lead(t, ctx, a, "a")
	bctx, bcancel := context.WithCancel(ctx)
	chB := s.campaign(t, bctx, b)
	s.eventuallyLeader(t, ctx, b, a.Identity())
	pending(t, chB, "b")
	bcancel()
	select {
	case r := <-chB:
		require.ErrorIs(t, r.err, context.Canceled, "cancelled Campaign")
		require.Nil(t, r.l)
	case <-time.After(s.Timeout):
		require.FailNow(t, "timed out", "cancelled Campaign did not return within %v", s.Timeout)
	}
	// b must not lead once a is gone.
	s.resign(t, la)
	s.eventuallyNoLeader(t, ctx, a)

	// b can campaign again.
	lb := s.lead(t, ctx, b, "b after its cancelled campaign")
	require.Greater(t, lb.Token(), la.Token())
	s.resign(t, lb)
}

func testCampaignContextBoundsWaitOnly(t *testing.T, s *suite) {
	ctx := s.ctx(t)
	a, b := s.NewCandidate(t), s.NewCandidate(t)
	actx, acancel := context.WithCancelCause(ctx)
	la := s.lead(t, actx, a, "a")
	chB := s.campaign(t, ctx, b)
	s.eventuallyLeader(t, ctx, b, a.Identity())
	acancel(errors.New("campaign context ended"))
	// The term is not a child of the Campaign context: it is still live,
	// and still the leader's, after that context ended.
	require.NoError(t, la.Context().Err(), "a's term ended with its Campaign context")
	require.Equal(t, a.Identity(), s.eventuallyLeader(t, ctx, b, a.Identity()).Identity)
	pending(t, chB, "b while a's term outlives its Campaign context")
	s.resign(t, la)
	require.ErrorIs(t, context.Cause(la.Context()), election.ErrResigned)
	lb := s.win(t, chB, "b after a resigned")
	require.Greater(t, lb.Token(), la.Token())
	s.resign(t, lb)
}

func testTokensIncrease(t *testing.T, s *suite) {
	ctx := s.ctx(t)
	a, b := s.NewCandidate(t), s.NewCandidate(t)
	var last election.Token
	for i, c := range []election.Elector{a, a, b, a, b, b} {
		l := s.lead(t, ctx, c, fmt.Sprintf("term %d", i))
		require.NotZero(t, l.Token(), "term %d token", i)
		require.Greater(t, l.Token(), last, "term %d token", i)
		last = l.Token()
		info := s.eventuallyLeader(t, ctx, a, c.Identity())
		if info.Token != 0 {
			require.Equal(t, l.Token(), info.Token, "Leader's token in term %d", i)
		}
		s.resign(t, l)
	}
}

func testObserveFinalState(t *testing.T, s *suite) {
	ctx := s.ctx(t)
	obs := s.NewCandidate(t)
	a, b, c := s.NewCandidate(t), s.NewCandidate(t), s.NewCandidate(t)

	octx, ocancel := context.WithCancel(ctx)
	ch := obs.Observe(octx)
	first := s.next(t, ch, "first state")
	require.True(t, first.IsZero(), "first state with nobody leading: %+v", first)
	_, err := obs.Leader(s.bounded(t, ctx))
	require.ErrorIs(t, err, election.ErrNoLeader)

	la := s.lead(t, ctx, a, "a")
	s.observeUntil(t, ch, func(i election.LeaderInfo) bool { return i.Identity == a.Identity() }, "a leads")
	s.resign(t, la)
	s.observeUntil(t, ch, election.LeaderInfo.IsZero, "nobody leads")

	// A burst of changes the observer does not read; then it must
	// deliver the final state.
	for _, x := range []election.Elector{b, a, b} {
		s.resign(t, s.lead(t, ctx, x, "burst"))
	}
	lc := s.lead(t, ctx, c, "c")
	got := s.observeUntil(t, ch, func(i election.LeaderInfo) bool { return i.Identity == c.Identity() }, "final state c")
	if got.Token != 0 {
		require.Equal(t, lc.Token(), got.Token)
	}

	ocancel()
	deadline := time.After(s.Timeout)
	for open := true; open; {
		select {
		case _, open = <-ch:
		case <-deadline:
			require.FailNow(t, "timed out", "Observe channel not closed within %v of its context ending", s.Timeout)
		}
	}
	s.resign(t, lc)
}

func testCampaignWhileLeading(t *testing.T, s *suite) {
	ctx := s.ctx(t)
	a := s.NewCandidate(t)
	la := s.lead(t, ctx, a, "a")
	cctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	l2, err := a.Campaign(cctx)
	require.Error(t, err, "second Campaign while leading")
	require.Nil(t, l2)
	require.NoError(t, la.Context().Err(), "term after a failed second Campaign")
	s.eventuallyLeader(t, ctx, a, a.Identity())
	s.resign(t, la)
}

func testCloseLeavesReleaseToHolder(t *testing.T, s *suite) {
	ctx := s.ctx(t)
	a, b := s.NewCandidate(t), s.NewCandidate(t)
	closer, ok := a.(io.Closer)
	if !ok {
		t.Skip("the candidate has no Close")
	}
	la := s.lead(t, ctx, a, "a")
	chB := s.campaign(t, ctx, b)
	s.eventuallyLeader(t, ctx, b, a.Identity())

	require.NoError(t, s.close(t, closer, "a"), "Close")
	require.ErrorIs(t, context.Cause(la.Context()), election.ErrClosed, "a's term context when Close returned")
	// The holder has not stepped down yet (its lead may still be running):
	// the term is still its own on the server.
	info, err := b.Leader(s.bounded(t, ctx))
	require.NoError(t, err, "Leader right after a's Close")
	require.Equal(t, a.Identity(), info.Identity, "Close released a's term behind its holder's back")
	pending(t, chB, "b before a's holder resigned")

	// The holder steps down: its Resign releases, and b wins at once.
	s.resign(t, la)
	lb := s.win(t, chB, "b after a's holder resigned")
	require.Greater(t, lb.Token(), la.Token())
	_, err = a.Campaign(s.bounded(t, ctx))
	require.ErrorIs(t, err, election.ErrClosed, "Campaign after Close")
	s.resign(t, lb)
}

// next receives one state from an Observe channel.
func (s *suite) next(t *testing.T, ch <-chan election.LeaderInfo, what string) election.LeaderInfo {
	t.Helper()
	select {
	case i, ok := <-ch:
		require.True(t, ok, "%s: Observe channel closed", what)
		return i
	case <-time.After(s.Timeout):
		require.FailNow(t, "timed out", "%s: nothing observed within %v", what, s.Timeout)
		return election.LeaderInfo{}
	}
}

// observeUntil reads states until one satisfies ok.
func (s *suite) observeUntil(t *testing.T, ch <-chan election.LeaderInfo, ok func(election.LeaderInfo) bool, what string) election.LeaderInfo {
	t.Helper()
	deadline := time.After(s.Timeout)
	var seen []election.LeaderInfo
	for {
		select {
		case i, open := <-ch:
			require.True(t, open, "%s: Observe channel closed; seen %+v", what, seen)
			if ok(i) {
				return i
			}
			seen = append(seen, i)
		case <-deadline:
			require.FailNow(t, "timed out", "%s: not observed within %v; seen %+v", what, s.Timeout, seen)
			return election.LeaderInfo{}
		}
	}
}

// eventuallyLeader waits, by c's Observe stream, until c sees identity
// lead, then checks that c's Leader agrees.
func (s *suite) eventuallyLeader(t *testing.T, ctx context.Context, c election.Elector, identity string) election.LeaderInfo {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	info, err := WaitLeader(wctx, c, identity)
	require.NoError(t, err)
	got, err := c.Leader(wctx)
	require.NoError(t, err, "Leader after Observe reported %q", identity)
	require.Equal(t, identity, got.Identity, "Leader after Observe reported %q", identity)
	return info
}

// eventuallyNoLeader waits, by c's Observe stream, until c sees nobody
// lead, then checks that c's Leader returns ErrNoLeader.
func (s *suite) eventuallyNoLeader(t *testing.T, ctx context.Context, c election.Elector) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	_, err := WaitLeader(wctx, c, "")
	require.NoError(t, err)
	_, err = c.Leader(wctx)
	require.ErrorIs(t, err, election.ErrNoLeader, "Leader after Observe reported no leader")
}
