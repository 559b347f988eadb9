package electiontest

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

	// Timeout bounds every wait for something that must happen: a
	// campaign winning after a release, a term noticing its loss, Observe
	// catching up. Zero means 10 seconds. Backends whose loss detection
	// waits out a lease duration should set it above that duration.
	Timeout time.Duration
}

// Run runs the conformance suite every election.Elector passes, each case
// as a subtest on a fresh election from newSubject:
//   - MutualExclusion: candidates racing through many terms never hold two
//     live term contexts at once;
//   - HandoverOnResign: Resign ends the term context with cause
//     election.ErrResigned and a waiting candidate wins;
//   - LossOnSessionDeath: a killed session ends the term context with cause
//     election.ErrLeadershipLost, a waiting candidate wins, and the loser
//     can campaign again;
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
//     and does not disturb the term.
func Run(t *testing.T, newSubject func(t *testing.T) Subject) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(t *testing.T, s *suite)
	}{
		{"MutualExclusion", testMutualExclusion},
		{"HandoverOnResign", testHandoverOnResign},
		{"LossOnSessionDeath", testLossOnSessionDeath},
		{"CampaignContextCancelled", testCampaignContextCancelled},
		{"CampaignContextBoundsWaitOnly", testCampaignContextBoundsWaitOnly},
		{"TokensIncrease", testTokensIncrease},
		{"ObserveFinalState", testObserveFinalState},
		{"CampaignWhileLeading", testCampaignWhileLeading},
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

// campaign starts c.Campaign in a goroutine that the test waits for at
// cleanup at the latest.
func (s *suite) campaign(t *testing.T, ctx context.Context, c election.Elector) <-chan campaignResult {
	ch := make(chan campaignResult, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l, err := c.Campaign(ctx)
		ch <- campaignResult{l, err}
	}()
	t.Cleanup(wg.Wait)
	return ch
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

func testMutualExclusion(t *testing.T, s *suite) {
	const candidates, termsEach = 3, 4
	ctx := s.ctx(t)
	var (
		mu      sync.Mutex
		holders int
		most    int
		tokens  []election.Token
	)
	errs := make(chan error, candidates)
	var wg sync.WaitGroup
	for i := range candidates {
		c := s.NewCandidate(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				for range termsEach {
					// The term is a child of the Campaign context: it
					// must stay live until Resign.
					cctx, cancel := context.WithTimeout(ctx, s.Timeout*candidates*termsEach)
					defer cancel()
					l, err := c.Campaign(cctx)
					if err != nil {
						return fmt.Errorf("candidate %d: Campaign: %w", i, err)
					}
					mu.Lock()
					holders++
					most = max(most, holders)
					tokens = append(tokens, l.Token())
					mu.Unlock()
					// Give a competing leader, if the backend allowed one,
					// the chance to show up.
					_, _ = c.Leader(ctx)
					if err := l.Context().Err(); err != nil {
						return fmt.Errorf("candidate %d: term ended while leading: %w", i, context.Cause(l.Context()))
					}
					mu.Lock()
					holders--
					mu.Unlock()
					rctx, rcancel := context.WithTimeout(ctx, s.Timeout)
					err = l.Resign(rctx)
					rcancel()
					if err != nil {
						return fmt.Errorf("candidate %d: Resign: %w", i, err)
					}
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, 1, most, "two candidates led at once")
	require.Len(t, tokens, candidates*termsEach)
	for i := 1; i < len(tokens); i++ {
		require.Greater(t, tokens[i], tokens[i-1], "tokens in term order: %v", tokens)
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
	_, err := obs.Leader(ctx)
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

// eventuallyLeader waits until c's Leader reports identity.
func (s *suite) eventuallyLeader(t *testing.T, ctx context.Context, c election.Elector, identity string) election.LeaderInfo {
	t.Helper()
	var info election.LeaderInfo
	var err error
	require.Eventually(t, func() bool {
		info, err = c.Leader(ctx)
		return err == nil && info.Identity == identity
	}, s.Timeout, 5*time.Millisecond, "Leader() = %+v, %v; want %q", &info, &err, identity)
	return info
}

// eventuallyNoLeader waits until c's Leader reports ErrNoLeader.
func (s *suite) eventuallyNoLeader(t *testing.T, ctx context.Context, c election.Elector) {
	t.Helper()
	var info election.LeaderInfo
	var err error
	require.Eventually(t, func() bool {
		info, err = c.Leader(ctx)
		return errors.Is(err, election.ErrNoLeader)
	}, s.Timeout, 5*time.Millisecond, "Leader() = %+v, %v; want ErrNoLeader", &info, &err)
}
