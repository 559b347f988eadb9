package electiontest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/internal/event"
)

// Errors the fake returns.
var (
	// ErrPartitioned is returned by Leader on a partitioned candidate.
	ErrPartitioned = errors.New("electiontest: candidate is partitioned")
	// ErrNotCampaigning is returned by Election.Elect for a candidate that
	// is not waiting in Campaign.
	ErrNotCampaigning = errors.New("electiontest: candidate is not campaigning")
	// ErrBusy is returned by Campaign on a candidate that already leads or
	// campaigns.
	ErrBusy = errors.New("electiontest: candidate already leads or campaigns")
)

// Option configures an Election.
type Option func(*Election)

// Manual makes an Election fill a vacancy only when the test calls Elect:
// campaigning candidates wait until then. By default the candidate that has
// waited longest wins as soon as nobody leads.
func Manual() Option { return func(e *Election) { e.manual = true } }

// Election is an in-memory election that several fake candidates join. A
// test drives it: Elect a campaigning candidate, Depose the leader,
// Partition or Kill a candidate. All methods are safe for concurrent use.
//
// The fake keeps the contract of election.Elector (one leader at a time,
// strictly increasing tokens, term contexts that end before anybody else
// can win, Observe never missing the final state), but it is not a model
// of a distributed system. Its limits:
//   - Time plays no part. A killed or partitioned leader loses its term at
//     once and a successor can win at once; on etcd or a Lease the
//     successor waits out the session TTL or lease duration first, and the
//     old leader notices its loss only within that time.
//   - Because loss is noticed at once, two fake terms never overlap, even
//     briefly. Code that is only correct because of that is not proven
//     correct by the fake: fence writes with the token all the same.
//   - There is no network: Campaign, Resign and Leader never fail for
//     reasons other than a partition, a cancelled context or misuse.
//   - Tokens start at 1 and count terms; real backends' tokens are
//     revisions or transition counts with gaps.
//   - Terms do not implement election.Expiring: there is no ValidUntil,
//     no renewal and no clock, so nothing about clock rates, skew margins
//     or a holder paused past its validity is modelled, and Leading is
//     simply "term context live".
//   - A partition is all or nothing and ends the leader's term at once;
//     partial partitions (a candidate that reaches the backend but not
//     its peers), slow or lost answers, and requests that land after the
//     partition healed are not modelled.
//   - A Resign always succeeds; a failed release that must be retried,
//     and a successor that waits for a release in flight, are not
//     modelled.
//   - There are no Metrics observations or events. Close ends the
//     candidate's term context and leaves the release to its holder's
//     Resign, as the real electors' Close does; since nothing expires,
//     a closed candidate's term that is never resigned holds the election
//     for good, where a real backend lets it expire.
//
// Everything on this list is covered by the real-server tests of package
// election (partitions through a cut proxy, hung servers, slow revokes).
type Election struct {
	manual bool
	value  event.Value[election.LeaderInfo]

	mu      sync.Mutex
	token   election.Token
	leader  *leadership
	waiting []*waiter     // in arrival order
	queued  chan struct{} // closed and replaced when waiting changes
}

// NewElection returns an election that nobody leads.
func NewElection(opts ...Option) *Election {
	e := &Election{queued: make(chan struct{})}
	for _, o := range opts {
		o(e)
	}
	e.value.Set(election.LeaderInfo{})
	return e
}

// NewCandidate joins a candidate with the given identity; an empty identity
// is replaced by election.DefaultIdentity().
func (e *Election) NewCandidate(identity string) *Candidate {
	if identity == "" {
		identity = election.DefaultIdentity()
	}
	return &Candidate{e: e, id: identity, healed: closedChan(), closeCh: make(chan struct{})}
}

// Leader returns the current leader as the election itself sees it (the
// zero LeaderInfo when nobody leads).
func (e *Election) Leader() election.LeaderInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.infoLocked()
}

// Waiting returns the identities of the candidates waiting in Campaign, in
// the order in which they would win.
func (e *Election) Waiting() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := make([]string, 0, len(e.waiting))
	for _, w := range e.waiting {
		ids = append(ids, w.c.id)
	}
	return ids
}

// AwaitWaiting blocks until at least n candidates wait in Campaign, or ctx
// ends (it returns ctx.Err() then).
func (e *Election) AwaitWaiting(ctx context.Context, n int) error {
	for {
		e.mu.Lock()
		count, changed := len(e.waiting), e.queued
		e.mu.Unlock()
		if count >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// queueChangedLocked wakes AwaitWaiting.
func (e *Election) queueChangedLocked() {
	close(e.queued)
	e.queued = make(chan struct{})
}

// Elect makes c lead now: the current leader, if any, loses its term
// (cause election.ErrLeadershipLost) and c's pending Campaign returns. It
// returns ErrNotCampaigning if c is not waiting in Campaign or is
// partitioned.
func (e *Election) Elect(c *Candidate) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, w := range e.waiting {
		if w.c == c && !c.partitioned && !c.closed {
			e.waiting = append(e.waiting[:i], e.waiting[i+1:]...)
			e.queueChangedLocked()
			if e.leader != nil {
				e.leader.loseLocked(errors.New("deposed by the test"))
			}
			e.grantLocked(w)
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrNotCampaigning, c.id)
}

// Depose ends the current leader's term as lost (cause
// election.ErrLeadershipLost) and reports whether somebody led. Unless the
// election is Manual, the longest-waiting candidate wins next.
func (e *Election) Depose() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.leader == nil {
		return false
	}
	e.leader.loseLocked(errors.New("deposed by the test"))
	return true
}

func (e *Election) infoLocked() election.LeaderInfo {
	if e.leader == nil {
		return election.LeaderInfo{}
	}
	return election.LeaderInfo{Identity: e.leader.c.id, Token: e.leader.token}
}

// vacateLocked clears the leader if it is t and fills the vacancy.
func (e *Election) vacateLocked(t *leadership) {
	if e.leader != t {
		return
	}
	e.leader = nil
	e.fillLocked()
	e.value.Set(e.infoLocked())
}

// fillLocked lets the longest-waiting reachable candidate win if nobody leads.
func (e *Election) fillLocked() {
	if e.manual || e.leader != nil {
		return
	}
	for i, w := range e.waiting {
		if !w.c.partitioned && !w.c.closed {
			e.waiting = append(e.waiting[:i], e.waiting[i+1:]...)
			e.queueChangedLocked()
			e.grantLocked(w)
			return
		}
	}
}

// grantLocked starts w's term. The leader must be nil.
func (e *Election) grantLocked(w *waiter) {
	e.token++
	// The Campaign context bounds the wait only: the term outlives it and
	// ends through Resign or a loss, which vacate synchronously.
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(w.ctx))
	t := &leadership{e: e, c: w.c, token: e.token, ctx: ctx, cancel: cancel}
	e.leader = t
	w.c.term = t
	w.c.busy = true
	w.c.leadingChangedLocked()
	w.won <- t
	e.value.Set(e.infoLocked())
}

func (e *Election) removeWaiterLocked(w *waiter) bool {
	for i, x := range e.waiting {
		if x == w {
			e.waiting = append(e.waiting[:i], e.waiting[i+1:]...)
			e.queueChangedLocked()
			return true
		}
	}
	return false
}

type waiter struct {
	c   *Candidate
	ctx context.Context
	won chan *leadership // buffered, receives exactly one term
}

// Candidate is a fake candidate in an Election. It implements
// election.Elector; all methods are safe for concurrent use.
type Candidate struct {
	e  *Election
	id string

	// guarded by e.mu
	busy        bool // campaigning or leading
	term        *leadership
	partitioned bool
	closed      bool
	closeCh     chan struct{} // closed by Close
	healed      chan struct{} // closed while not partitioned
	changed     chan struct{} // closed at the next start or end of a term; nil until asked for
}

var (
	_ election.Elector    = (*Candidate)(nil)
	_ election.TermHolder = (*Candidate)(nil)
)

// Identity implements election.Elector.
func (c *Candidate) Identity() string { return c.id }

// Leading reports, as the real electors' Leading does, whether the
// candidate holds a term whose context is live. It sends nothing.
func (c *Candidate) Leading() bool {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	return c.term != nil && c.term.ctx.Err() == nil
}

// Current implements election.TermHolder, as the real electors' Current
// does: the term the candidate holds while Leading reports true.
func (c *Candidate) Current() (election.Leadership, bool) {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	if c.term == nil || c.term.ctx.Err() != nil {
		return nil, false
	}
	return c.term, true
}

// LeadingChanged returns a channel that is closed when the candidate next
// starts or ends a term, as the real electors' LeadingChanged does; read
// Leading after it is closed, and call LeadingChanged again for the next
// change.
func (c *Candidate) LeadingChanged() <-chan struct{} {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	return c.changed
}

// leadingChangedLocked wakes LeadingChanged's waiters.
func (c *Candidate) leadingChangedLocked() {
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// Campaign implements election.Elector. It waits in line behind the
// candidates that campaigned before it; a partitioned candidate waits until
// it is healed. ctx bounds the wait only: the term outlives it and ends
// through Resign or a loss.
func (c *Candidate) Campaign(ctx context.Context) (election.Leadership, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("electiontest: campaign: %w", err)
	}
	e := c.e
	e.mu.Lock()
	if c.closed {
		e.mu.Unlock()
		return nil, election.ErrClosed
	}
	if c.busy {
		e.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrBusy, c.id)
	}
	c.busy = true
	w := &waiter{c: c, ctx: ctx, won: make(chan *leadership, 1)}
	e.waiting = append(e.waiting, w)
	e.queueChangedLocked()
	e.fillLocked()
	e.mu.Unlock()

	select {
	case t := <-w.won:
		if t.ctx.Err() != nil {
			// Lost, or closed, before Campaign could hand it out: nobody
			// holds it, so it is vacated here.
			t.release()
			if cause := context.Cause(t.ctx); errors.Is(cause, election.ErrClosed) {
				return nil, election.ErrClosed
			}
			return nil, fmt.Errorf("electiontest: campaign: %w", context.Cause(t.ctx))
		}
		return t, nil
	case <-ctx.Done():
		c.abandon(w, context.Cause(ctx))
		return nil, fmt.Errorf("electiontest: campaign: %w", ctx.Err())
	case <-c.closeCh:
		c.abandon(w, election.ErrClosed)
		return nil, election.ErrClosed
	}
}

// abandon takes w out of the line after its Campaign gave up. If w won
// at the same moment, nobody will hold the term: it is ended with cause
// and vacated.
func (c *Candidate) abandon(w *waiter, cause error) {
	e := c.e
	e.mu.Lock()
	removed := e.removeWaiterLocked(w)
	if removed {
		c.busy = false
	}
	e.mu.Unlock()
	if !removed {
		t := <-w.won
		t.cancel(cause)
		t.release()
	}
}

// Close drops the candidate, as the real electors' Close does: its term,
// if any, ends at once with cause election.ErrClosed but stays held until
// its holder's Resign releases it, so that it is never released behind its
// holder's back; a pending Campaign returns election.ErrClosed, and so do
// later ones. Close is idempotent and returns nil.
func (c *Candidate) Close() error {
	e := c.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	close(c.closeCh)
	if c.term != nil && c.term.ctx.Err() == nil {
		c.term.cancel(election.ErrClosed)
		c.leadingChangedLocked()
	}
	return nil
}

// Leader implements election.Elector. It returns ErrPartitioned while the
// candidate is partitioned.
func (c *Candidate) Leader(ctx context.Context) (election.LeaderInfo, error) {
	if err := ctx.Err(); err != nil {
		return election.LeaderInfo{}, err
	}
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	if c.partitioned {
		return election.LeaderInfo{}, ErrPartitioned
	}
	if c.e.leader == nil {
		return election.LeaderInfo{}, election.ErrNoLeader
	}
	return c.e.infoLocked(), nil
}

// Observe implements election.Elector. While the candidate is partitioned
// nothing is delivered; after Heal the newest state is.
func (c *Candidate) Observe(ctx context.Context) <-chan election.LeaderInfo {
	ch := make(chan election.LeaderInfo)
	w := c.e.value.Watch()
	go func() {
		defer close(ch)
		defer w.Close()
		var last election.LeaderInfo
		first := true
		for {
			info, err := w.Get(ctx)
			if err != nil {
				return
			}
			if !first && info == last {
				continue
			}
			c.e.mu.Lock()
			healed := c.healed
			c.e.mu.Unlock()
			select {
			case <-healed:
			case <-ctx.Done():
				return
			}
			if c.isPartitioned() {
				// Partitioned again between the checks: wait for the next
				// state after the next Heal (Heal republishes the state).
				continue
			}
			select {
			case ch <- info:
				first, last = false, info
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

func (c *Candidate) isPartitioned() bool {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	return c.partitioned
}

// Partition cuts the candidate off: its term, if any, is lost at once
// (cause election.ErrLeadershipLost), its pending Campaign cannot win, and
// Leader and Observe stop answering until Heal.
func (c *Candidate) Partition() {
	e := c.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if c.partitioned {
		return
	}
	c.partitioned = true
	c.healed = make(chan struct{})
	if c.term != nil {
		c.term.loseLocked(errors.New("partitioned"))
	}
}

// Heal ends a partition: a pending Campaign can win again.
func (c *Candidate) Heal() {
	e := c.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if !c.partitioned {
		return
	}
	c.partitioned = false
	close(c.healed)
	e.fillLocked()
	// Republish so that partitioned observers deliver the newest state.
	e.value.Set(e.infoLocked())
}

// Kill ends the candidate's term as lost (cause election.ErrLeadershipLost),
// as when its session or lease dies. The candidate can campaign again.
// It reports whether the candidate was leading.
func (c *Candidate) Kill() bool {
	e := c.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if c.term == nil {
		return false
	}
	c.term.loseLocked(errors.New("session killed by the test"))
	return true
}

// leadership is a fake term, the fake's election.Leadership.
type leadership struct {
	e      *Election
	c      *Candidate
	token  election.Token
	ctx    context.Context
	cancel context.CancelCauseFunc
}

var _ election.Leadership = (*leadership)(nil)

func (t *leadership) Context() context.Context { return t.ctx }
func (t *leadership) Token() election.Token    { return t.token }
func (t *leadership) Identity() string         { return t.c.id }

// Resign ends the term context, then releases leadership.
func (t *leadership) Resign(context.Context) error {
	t.cancel(election.ErrResigned)
	t.release()
	return nil
}

// loseLocked ends the term as lost and vacates it at once.
func (t *leadership) loseLocked(reason error) {
	t.cancel(fmt.Errorf("%w: %w", election.ErrLeadershipLost, reason))
	t.releaseLocked()
}

func (t *leadership) release() {
	t.e.mu.Lock()
	defer t.e.mu.Unlock()
	t.releaseLocked()
}

// releaseLocked vacates the term if it still leads. Callers end the term
// context first, so a successor never wins while this term's context is
// still live.
func (t *leadership) releaseLocked() {
	t.e.vacateLocked(t)
	if t.c.term == t {
		t.c.term = nil
		t.c.busy = false
		t.c.leadingChangedLocked()
	}
}

func closedChan() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}
