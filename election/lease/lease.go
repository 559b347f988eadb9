package lease

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/internal/event"
	"github.com/reconkit/reconkit/internal/jitter"
	"github.com/reconkit/reconkit/internal/term"
)

// Defaults of Config. They are client-go's (15 s / 10 s / 2 s), so a
// fleet that mixes client-go candidates and ours on one Lease, each with its
// defaults, agrees on timing. Unlike client-go, handover speed does not
// depend on them: followers watch the Lease and take a released lease at
// once, so there is no reason to shorten RetryPeriod for that.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// leaseJitter is client-go's JitterFactor: a client-go LeaderElector
// requires RenewDeadline > JitterFactor × RetryPeriod, and so do we, so that
// one configuration is valid for both.
const leaseJitter = 1.2

// minSkewFraction is the smallest share of LeaseDuration that
// LeaseDuration − RenewDeadline may be: the margin must absorb clock rate
// differences between hosts (5 % here) and the delay between a renewal's
// start and a follower seeing it.
const minSkewFraction = 20

// Config configures New.
type Config struct {
	// Client talks to the apiserver. Required. It must not go through
	// GuardedConfig: the elector's own writes are not gated.
	Client kubernetes.Interface
	// Namespace and Name locate the coordination.k8s.io/v1 Lease. Required.
	Namespace, Name string
	// Identity names this candidate in the Lease's holderIdentity.
	// Empty means election.DefaultIdentity().
	Identity string

	// LeaseDuration is how long followers wait, after they last saw the
	// record change, before they take the lease. It is written to the
	// Lease as leaseDurationSeconds, so it must be a whole number of
	// seconds. Zero means DefaultLeaseDuration.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader trusts a successful renewal,
	// counted from the instant it sent it: ValidUntil is the start of the
	// last renewal that a follower can tell apart + RenewDeadline, which is
	// LeaseDuration less a clock skew margin of LeaseDuration −
	// RenewDeadline. Past ValidUntil the term ends even if no answer came.
	// client-go's leader keeps acting up to RetryPeriod longer than that.
	// Must be below LeaseDuration by at least LeaseDuration/20, and above
	// 1.2 × RetryPeriod. Zero means DefaultRenewDeadline.
	RenewDeadline time.Duration
	// RetryPeriod is the leader's renewal interval, and the polling
	// interval of a follower whose watch failed. Zero means
	// DefaultRetryPeriod.
	RetryPeriod time.Duration
	// TakeoverMargin is how much longer than the holder's
	// leaseDurationSeconds this candidate waits, after it last saw the
	// record change, before it takes over a lease that another candidate
	// holds. A released lease (no holder) is taken at once whatever the
	// margin. Zero, the default, takes over exactly when client-go would.
	// Set it where client-go candidates with ReleaseOnCancel share the
	// Lease: such a holder, cut off from the apiserver, believes it leads
	// until RetryPeriod + 2 × RenewDeadline after its last visible
	// renewal, LeaseDuration being what it writes; the margin must cover
	// RetryPeriod + 2 × RenewDeadline − LeaseDuration of those candidates
	// (7s with client-go's defaults), plus a network delay. See "Mixed
	// with client-go" in the package documentation. Must not be negative.
	TakeoverMargin time.Duration

	// Clock is the time source; nil means the real clock. Validity is
	// judged on it, so it must be monotonic (the real clock is).
	Clock clock.Clock

	// Rand seeds the jitter of the elector's waits (retries of reads and
	// writes, renewal retries, the LeaseCandidate's retries): New draws
	// from it, on its caller's goroutine, the seeds of one source for
	// each of those loops, so that their draws do not depend on the order
	// in which their goroutines run. It returns values uniformly in
	// [0, 1); nil means the waits draw from math/rand/v2's global source.
	Rand func() float64

	// Coordinated, when set, makes the candidate take part in Coordinated
	// Leader Election: it publishes a LeaseCandidate and adopts the Lease
	// only when the apiserver's election controller names it. Nil means
	// the candidates elect themselves, as client-go's do by default.
	Coordinated *Coordinated

	// Metrics receives an election.Observation at every acquisition, renewal
	// attempt, loss and resignation (Backend "lease", Election
	// namespace/name). Nil means none.
	Metrics election.Metrics
	// Events receives LeaderElected, LeadershipLost (Warning) and
	// Resigned events. Nil means none.
	Events election.EventRecorder
}

// Elector is a candidate in an election held on a Kubernetes Lease, in
// the record format of client-go's LeaseLock. It implements election.Elector; its
// election.Leadership also implements election.Expiring.
//
// It is safe for concurrent use. It starts goroutines only within Campaign,
// Observe and a term, and each stops when its context (or term) ends.
type Elector struct {
	cfg Config
	// rand is a source of its own for the retries of Campaign and of the
	// follower's reads, for the terms' renewal retries and for the
	// LeaseCandidate's retries, split from Config.Rand in New (nil
	// without it), so that goroutines that wake at one instant do not
	// take each other's draws.
	rand   struct{ follow, renew, candidate func() float64 }
	leases coordinationclient.LeaseInterface
	clock  clock.Clock
	report term.Reporter

	ctx    context.Context // ends on Close
	cancel context.CancelFunc

	mu  sync.Mutex
	obs observation // newest state of the Lease any goroutine has seen
	// highest is the highest token of any state of the Lease this
	// candidate has seen, deleted ones included: the floor of the next
	// term's token (see tryAcquire).
	highest election.Token
	cur     *leadership // current or last term, nil before the first
	// witnessed is the resourceVersion of the last state of the Lease
	// that this process saw the election controller write naming it:
	// the state right after one that named another holder or none, in one
	// watch stream (Coordinated; see coordinatedWait).
	witnessed string
	closed    bool

	campaigning sync.Mutex // one Campaign at a time
	leading     term.Flag

	candidateOnce sync.Once      // starts the LeaseCandidate keeper (Coordinated)
	candidateWG   sync.WaitGroup // the keeper, waited for by Close
}

var (
	_ election.Elector    = (*Elector)(nil)
	_ election.TermHolder = (*Elector)(nil)
)

// New validates cfg, fills its defaults and returns a candidate. It
// sends no request.
func New(cfg Config) (*Elector, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("%w: Config.Client is required", election.ErrInvalidConfig)
	}
	if cfg.Namespace == "" || cfg.Name == "" {
		return nil, fmt.Errorf("%w: Config.Namespace and Name are required", election.ErrInvalidConfig)
	}
	if errs := validation.IsDNS1123Label(cfg.Namespace); len(errs) > 0 {
		return nil, fmt.Errorf("%w: invalid Lease namespace %q: %s", election.ErrInvalidConfig, cfg.Namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(cfg.Name); len(errs) > 0 {
		return nil, fmt.Errorf("%w: invalid Lease name %q: %s", election.ErrInvalidConfig, cfg.Name, strings.Join(errs, "; "))
	}
	if cfg.Identity == "" {
		cfg.Identity = election.DefaultIdentity()
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.RenewDeadline == 0 {
		cfg.RenewDeadline = DefaultRenewDeadline
	}
	if cfg.RetryPeriod == 0 {
		cfg.RetryPeriod = DefaultRetryPeriod
	}
	if err := cfg.validateDurations(); err != nil {
		return nil, err
	}
	if cfg.Coordinated != nil {
		co := *cfg.Coordinated // the caller's value is not modified
		cfg.Coordinated = &co
		if err := cfg.validateCoordinated(); err != nil {
			return nil, err
		}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Elector{
		cfg:    cfg,
		leases: cfg.Client.CoordinationV1().Leases(cfg.Namespace),
		clock:  cfg.Clock,
		report: term.Reporter{
			Metrics: cfg.Metrics, Events: cfg.Events,
			Backend: "lease", Election: cfg.Namespace + "/" + cfg.Name, Identity: cfg.Identity,
		},
		ctx:    ctx,
		cancel: cancel,
	}
	e.rand.follow, e.rand.renew, e.rand.candidate = jitter.Split(cfg.Rand), jitter.Split(cfg.Rand), jitter.Split(cfg.Rand)
	return e, nil
}

func (c *Config) validateDurations() error {
	ld, rd, rp := c.LeaseDuration, c.RenewDeadline, c.RetryPeriod
	switch {
	case ld < time.Second || ld%time.Second != 0 || ld/time.Second > math.MaxInt32:
		return fmt.Errorf("%w: LeaseDuration %v must be a whole number of seconds, at least 1s (the Lease stores seconds)", election.ErrInvalidConfig, ld)
	case rd <= 0 || rp <= 0:
		return fmt.Errorf("%w: RenewDeadline %v and RetryPeriod %v must be positive", election.ErrInvalidConfig, rd, rp)
	case rd >= ld:
		return fmt.Errorf("%w: RenewDeadline %v must be less than LeaseDuration %v", election.ErrInvalidConfig, rd, ld)
	case ld-rd < ld/minSkewFraction:
		return fmt.Errorf("%w: LeaseDuration − RenewDeadline = %v leaves too little clock skew margin; it must be at least LeaseDuration/%d = %v", election.ErrInvalidConfig, ld-rd, minSkewFraction, ld/minSkewFraction)
	case float64(rd) <= leaseJitter*float64(rp):
		return fmt.Errorf("%w: RenewDeadline %v must be greater than %.1f × RetryPeriod %v", election.ErrInvalidConfig, rd, leaseJitter, rp)
	case c.TakeoverMargin < 0:
		return fmt.Errorf("%w: TakeoverMargin %v is negative", election.ErrInvalidConfig, c.TakeoverMargin)
	}
	return nil
}

// Identity implements election.Elector.
func (e *Elector) Identity() string { return e.cfg.Identity }

// Leading reports, without a request, whether this candidate holds a term
// it may act on now: leader flag up, term context live, clock before
// ValidUntil. The write gate of GuardedConfig asks the same question.
func (e *Elector) Leading() bool { return e.validNow() }

// Current implements election.TermHolder: the term this candidate holds,
// while Leading reports true. It is the term a GuardedConfig for this
// moment is built on.
func (e *Elector) Current() (election.Leadership, bool) {
	t := e.current()
	if t == nil || !t.ValidNow() {
		return nil, false
	}
	return t, true
}

// LeadingChanged returns a channel that is closed when this candidate next
// starts or ends a term; read Leading after it is closed, and call
// LeadingChanged again for the change after that. It costs no request and
// no goroutine.
func (e *Elector) LeadingChanged() <-chan struct{} { return e.leading.Changed() }

// Close ends the current term, if any, at once with cause
// election.ErrClosed: the leader flag drops and the renewals stop. It
// does not clear holderIdentity: a term is never released behind its
// holder's back. The holder's Resign, which Run sends once lead returned,
// releases it (the client must still work); a term never resigned expires
// for followers LeaseDuration after its last renewal, as a crashed
// holder's would. To hand over at once on shutdown, end Run's context (or
// Resign) before Close.
//
// Close also aborts a pending Campaign, deletes the LeaseCandidate
// (Coordinated), and waits for the goroutines of the term and the
// candidate. Later Campaigns return election.ErrClosed. Close is
// idempotent and returns nil; Observe streams end with their own
// contexts.
func (e *Elector) Close() error {
	e.mu.Lock()
	e.closed = true
	cur := e.cur
	e.mu.Unlock()
	e.cancel()
	// A Campaign in progress returns once it sees the cancellation; wait
	// for it so that no term starts after Close returned.
	e.campaigning.Lock()
	defer e.campaigning.Unlock()
	defer e.candidateWG.Wait() // the LeaseCandidate keeper deletes it and exits
	e.mu.Lock()
	if e.cur != cur {
		cur = e.cur
	}
	e.mu.Unlock()
	if cur == nil || cur.core == nil {
		return nil
	}
	cur.leading.Store(false)
	cur.core.Close()
	<-cur.exited
	return nil
}

// Config returns the configuration with defaults filled in.
func (e *Elector) Config() Config { return e.cfg }

// Leader implements election.Elector. It reads the Lease once. A holder counts as
// leader until the lease expires as judged by this candidate: it has to
// see the record unchanged for the lease duration, so right after a crash
// of the leader (or on the first read of a stale Lease) Leader still names
// it, as a client-go candidate would.
func (e *Elector) Leader(ctx context.Context) (election.LeaderInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	lease, err := e.leases.Get(ctx, e.cfg.Name, metav1.GetOptions{})
	var obs observation
	switch {
	case apierrors.IsNotFound(err):
		obs = e.note(nil, "")
	case err != nil:
		return election.LeaderInfo{}, fmt.Errorf("election: reading Lease %s/%s: %w", e.cfg.Namespace, e.cfg.Name, err)
	default:
		obs = e.note(lease, lease.ResourceVersion)
	}
	info := obs.leader(e.clock.Now())
	if info.IsZero() {
		return election.LeaderInfo{}, election.ErrNoLeader
	}
	return info, nil
}

// Observe implements election.Elector. It watches the Lease (polling every
// RetryPeriod while the watch fails) and reports "no leader" when the lease
// is released, deleted, or expires by this candidate's clock; expiry is a
// timer at the expiry instant, not a poll.
func (e *Elector) Observe(ctx context.Context) <-chan election.LeaderInfo {
	out := make(chan election.LeaderInfo)
	var v event.Value[election.LeaderInfo]
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		var last election.LeaderInfo
		first := true
		_ = e.follow(ctx, func(_ context.Context, o observation) followAction {
			now := e.clock.Now()
			info := o.leader(now)
			if first || info != last {
				first, last = false, info
				v.Set(info)
			}
			if info.IsZero() {
				return followAction{}
			}
			return followAction{wakeAt: o.expiry()}
		})
	}()
	go func() {
		defer wg.Done()
		w := v.Watch()
		defer w.Close()
		for {
			info, err := w.Get(ctx)
			if err != nil {
				return
			}
			select {
			case out <- info:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		wg.Wait()
		close(out)
	}()
	return out
}

// Campaign implements election.Elector. It blocks until this candidate holds the
// Lease, following it by a watch: a released lease is taken as soon as the
// release is seen, an expired one when the expiry timer fires. The term it
// returns implements election.Expiring; it ends with election.ErrLeadershipLost once
// ValidUntil passes without a successful renewal, or when another holder
// is found in the Lease. ctx bounds the wait only: the term outlives it
// and ends through Resign, a loss, or Close. It returns election.ErrClosed after
// Close.
//
// A new term's token is the Lease's epoch over leaseTransitions + 1,
// after this candidate incremented leaseTransitions to acquire it (to at
// least the count of the highest token it has seen on a Lease of the same
// epoch; see the package documentation).
func (e *Elector) Campaign(ctx context.Context) (election.Leadership, error) {
	if !e.campaigning.TryLock() {
		return nil, errors.New("election: Campaign already in progress on this candidate")
	}
	defer e.campaigning.Unlock()
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return nil, election.ErrClosed
	}
	// The wait also ends when the elector closes.
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(e.ctx, func() { cancel(election.ErrClosed) })
	defer stop()
	if prev := e.current(); prev != nil {
		if !prev.core.Ended() {
			return nil, errors.New("election: Campaign while leading; resign first")
		}
		select { // the previous term's release must finish first
		case <-prev.exited:
		case <-cctx.Done():
			return nil, e.campaignErr(cctx)
		}
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("lease", e.cfg.Namespace+"/"+e.cfg.Name, "identity", e.cfg.Identity)
	e.startCandidate(log)
	begun := e.clock.Now()
	for {
		won, err := e.campaignOnce(cctx, log)
		if err != nil {
			if cctx.Err() != nil {
				return nil, e.campaignErr(cctx)
			}
			return nil, err
		}
		won.begun = begun
		err = won.start(cctx)
		if err == nil {
			log.V(1).Info("acquired the lease", "token", won.Token())
			return won, nil
		}
		if cctx.Err() != nil {
			return nil, e.campaignErr(cctx)
		}
		log.Info("the new term was invalid on arrival; campaigning again", "err", err)
	}
}

// campaignErr is Campaign's error once its wait context ended.
func (e *Elector) campaignErr(cctx context.Context) error {
	if errors.Is(context.Cause(cctx), election.ErrClosed) {
		return election.ErrClosed
	}
	return fmt.Errorf("election: campaign: %w", cctx.Err())
}

// campaignOnce follows the Lease until this candidate acquires it.
func (e *Elector) campaignOnce(ctx context.Context, log logr.Logger) (*leadership, error) {
	var won *leadership
	// conflicts counts the takeover attempts in a row that met a
	// conflict. The first is read again at once (somebody else wrote
	// first, and the read shows who); the next ones wait a retry period,
	// as client-go's candidates do, so that a server or webhook that
	// answers every write with 409 does not make the candidate spin.
	conflicts := 0
	err := e.follow(ctx, func(ctx context.Context, o observation) followAction {
		now := e.clock.Now()
		switch {
		case e.cfg.Coordinated != nil:
			// The election controller picks; wait until it names us, or
			// until a term of our identity expired.
			if wait, until := e.coordinatedWait(o, now); wait {
				return followAction{wakeAt: until}
			}
		case o.held(now):
			return followAction{wakeAt: o.expiry()}
		}
		t, err := e.tryAcquire(ctx, o)
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			conflicts = 0
		}
		switch {
		case err == nil:
			// The previous holder's term ended, as this candidate saw it,
			// when the record expired or when its release was first seen.
			switch {
			case o.lease == nil:
			case o.rec.Holder != "":
				t.vacated = o.expiry()
			default:
				t.vacated = o.at
			}
			won = t
			return followAction{done: true}
		case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
			conflicts++
			if conflicts == 1 {
				return followAction{refresh: true} // somebody else wrote first: read again
			}
			return followAction{rereadAt: e.clock.Now().Add(e.retryWait())}
		case ctx.Err() != nil:
			return followAction{}
		default:
			log.Error(err, "acquiring the lease failed; retrying")
			return followAction{wakeAt: e.clock.Now().Add(e.retryWait())}
		}
	})
	if won == nil {
		return nil, fmt.Errorf("election: campaign: %w", err)
	}
	return won, nil
}

// tryAcquire writes this candidate into the Lease as the new holder, with
// leaseTransitions incremented (and raised above the highest token seen
// when the Lease was recreated within its second), using o's
// resourceVersion so that a concurrent writer makes one of the two fail
// with a conflict.
func (e *Elector) tryAcquire(ctx context.Context, o observation) (*leadership, error) {
	if o.rec.Transitions == math.MaxInt32 {
		return nil, errors.New("election: Lease leaseTransitions is at its maximum")
	}
	rctx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	start := e.clock.Now()
	rec := leaseRecord{
		Holder:          e.cfg.Identity,
		DurationSeconds: int32(e.cfg.LeaseDuration / time.Second),
		AcquireTime:     start,
		RenewTime:       start,
	}
	var (
		got *coordinationv1.Lease
		err error
	)
	floor := e.highestSeen()
	if o.lease == nil {
		// client-go starts a new Lease at leaseTransitions 0. Ours go on
		// from the highest token this candidate has seen, so that a Lease
		// deleted and created again within the same second (the same
		// epoch) still gives a token above every one it saw.
		rec.Transitions = transitionsAbove(floor)
		spec := rec.spec()
		got, err = e.leases.Create(rctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.cfg.Namespace, Name: e.cfg.Name},
			Spec:       spec,
		}, metav1.CreateOptions{})
	} else {
		rec.Transitions = max(o.rec.Transitions, 0) + 1
		if o.rec.Epoch == int64(floor>>32) {
			// Another writer recreated the Lease within the second of one
			// this candidate saw: go on from the highest token seen.
			rec.Transitions = max(rec.Transitions, transitionsAbove(floor))
		}
		// Fields of Coordinated Leader Election (KEP-4355), written by the
		// apiserver's election controller: the Strategy is kept. A
		// preferred holder is kept only by a coordinated candidate; an
		// uncoordinated one clears it, as client-go's does, since a leftover
		// (after a preemption and our own Resign, or after a fleet turned
		// CLE off) would make it yield at its first renewal, every term.
		rec.Strategy = o.rec.Strategy
		if e.cfg.Coordinated != nil {
			rec.PreferredHolder = o.rec.PreferredHolder
		}
		l := o.lease.DeepCopy()
		l.Spec = rec.spec()
		got, err = e.leases.Update(rctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		return nil, err
	}
	e.note(got, got.ResourceVersion)
	return newLeadership(e, got, start), nil
}

// highestSeen returns the highest token of any state of the Lease seen.
func (e *Elector) highestSeen() election.Token {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.highest
}

// transitionsAbove is the leaseTransitions that gives a term on a Lease of
// floor's epoch a token above floor: floor's count (its transitions + 1).
func transitionsAbove(floor election.Token) int32 {
	return int32(min(floor&0xffffffff, math.MaxInt32-1))
}

// current returns the current or last term.
func (e *Elector) current() *leadership {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cur
}

// note records a state of the Lease (nil: absent) read with resourceVersion
// rv, and returns the newest observation. A state older than one already
// seen is ignored; a record different from the last one restarts the
// expiry clock.
func (e *Elector) note(lease *coordinationv1.Lease, rv string) observation {
	e.mu.Lock()
	defer e.mu.Unlock()
	if lease != nil {
		e.highest = max(e.highest, recordFromLease(lease).token())
	}
	if e.obs.known && olderRV(rv, e.obs.rv) {
		return e.obs
	}
	now := e.clock.Now()
	if lease == nil {
		if !e.obs.known || e.obs.lease != nil {
			e.obs = observation{rv: rv, at: now, known: true}
		}
		e.obs.rv = rv
		return e.obs
	}
	rec := recordFromLease(lease)
	if !e.obs.known || e.obs.lease == nil || !rec.equal(e.obs.rec) {
		e.obs.at = now
	}
	e.obs.lease, e.obs.rv, e.obs.rec, e.obs.known = lease, rv, rec, true
	e.obs.margin = e.cfg.TakeoverMargin
	return e.obs
}

// snapshot returns the newest observation.
func (e *Elector) snapshot() observation {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.obs
}
