package versiongate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/internal/event"
	"github.com/reconkit/reconkit/internal/jitter"
	"github.com/reconkit/reconkit/internal/leadership"
)

// Defaults for Config fields left zero.
const (
	// DefaultSettleTime is how long a new leader waits, after taking over
	// from an earlier reconciler, before it reconciles.
	DefaultSettleTime = 5 * time.Second
	// DefaultReconcileInterval is the period of the leader's reconcile
	// after the initial one.
	DefaultReconcileInterval = 30 * time.Second
	// DefaultRecordTTL is the lease TTL of a published node record.
	DefaultRecordTTL = 10 * time.Second
)

// Errors callers branch on.
var (
	// ErrInvalidConfig is wrapped by New errors.
	ErrInvalidConfig = errors.New("versiongate: invalid config")
	// ErrLeadershipLost is returned internally, and logged, when a guarded
	// status write fails because the term is no longer valid. It is the
	// same value as election.ErrLeadershipLost, so errors.Is matches
	// either.
	ErrLeadershipLost = leadership.ErrLost
	// ErrRecordLost is wrapped by the error Run returns, and by the error
	// WaitReady returns, when the node record the gate publishes can no
	// longer be counted on: its local validity deadline passed without an
	// acknowledged keep-alive (before the server can expire it), or the
	// lease or record is gone. The leader may stop counting this node, so
	// the host must stop serving; it may then call Run and WaitReady again
	// on the same Gate, or set Config.RejoinAfterRecordLoss to have Run do
	// it.
	ErrRecordLost = errors.New("versiongate: node record lost")
	// ErrAlreadyRunning is returned by Run while another Run of the same
	// gate has not returned.
	ErrAlreadyRunning = errors.New("versiongate: already running")
)

// Term is one term of leadership the host's election granted: its
// context, fencing token, identity and Resign. Methods may be called from
// any goroutine.
//
// It is the same type as election.Leadership, spelled here because
// versiongate imports no other reconkit package: both are aliases of
// identical interface type literals, which Go treats as one type. So a
// term of any reconkit elector (etcd, Kubernetes Lease, or the in-memory
// electiontest fake) is a Term as it is, and an election.Elector is a
// Candidate as it is. election.Leadership's documentation is the
// reference for the methods' contract.
//
// Every status write is fenced by the term at the moment the store applies
// it (see Store): a term that also implements etcdstore.Guard is fenced by
// its etcd comparison on the etcd store, any other by its token.
type Term = interface {
	// Context ends the moment the term ends (lost, resigned, or the
	// elector closed); context.Cause tells which.
	Context() context.Context

	// Token returns the term's fencing token: it strictly increases
	// from term to term of one election, and is never zero.
	Token() uint64

	// Identity returns the leader's identity.
	Identity() string

	// Resign ends the term and releases leadership so that a successor
	// can take over at once. It returns only after the release completed
	// or failed, can be called again after a failure, and returns nil
	// after a lost term or a completed release.
	Resign(ctx context.Context) error
}

// Candidate runs for leadership on the host's election. Every
// election.Elector (etcd, Kubernetes Lease, electiontest's fake) is a
// Candidate as it is: Config{Candidate: elector}.
//
// The gate calls Campaign from one goroutine, never concurrently, and only
// while the local node has the newest release among the member nodes.
// ctx bounds the wait only: the gate cancels it when the node stops being
// the newest, or Run ends, while Campaign still waits, and Campaign must
// then return promptly (with an error wrapping ctx.Err()). Once Campaign
// returned a term, the gate never cancels ctx before it resigned that term,
// and it resigns only after its leader work (the reconcile included) has
// returned: a term is never released while the local reconcile runs, even
// with an election that ends its terms with the Campaign context.
type Candidate interface {
	Campaign(ctx context.Context) (Term, error)
}

// CandidateOf makes a Candidate of a campaign method returning a concrete
// term type, with no adapter to write. An election.Elector needs none of
// it; it serves when the host wants the concrete term too:
//
//	Candidate: versiongate.CandidateOf(elector.CampaignEtcd)
func CandidateOf[T Term](campaign func(ctx context.Context) (T, error)) Candidate {
	return CandidateFunc(func(ctx context.Context) (Term, error) {
		t, err := campaign(ctx)
		if err != nil {
			return nil, err
		}
		return t, nil
	})
}

// CandidateFunc adapts a function to Candidate.
type CandidateFunc func(ctx context.Context) (Term, error)

// Campaign calls f(ctx).
func (f CandidateFunc) Campaign(ctx context.Context) (Term, error) { return f(ctx) }

var _ Candidate = CandidateFunc(nil)

// ReconcileFunc brings the reconciled state to the local release's target.
// It has the type of election.Run's leader callback, so a host writes its
// leader work once: l is the term it runs in, and writes that can carry
// l.Token() should, so a deposed leader's late writes are refused.
//
// It is called from one goroutine, never concurrently with itself, and
// only while leading; ctx ends when the term ends and the function must
// then return promptly. It should be idempotent: the gate calls it at
// every takeover and then every ReconcileInterval for as long as the term
// lasts (the gate's periodic reconcile is the helper for periodic leader
// work; it never calls it after the term ended).
type ReconcileFunc func(ctx context.Context, l Term) error

// Config configures a Gate. Zero durations take the defaults above.
type Config struct {
	// Store holds the node records and the status; required. The etcd
	// store is etcdstore.New (package versiongate/etcdstore), so a host
	// that does not use it compiles no etcd client.
	Store Store
	// NodeID identifies the local node; required. With Decode nil it is
	// the ID of the record the gate publishes (its key below the nodes
	// prefix).
	NodeID string
	// Version is the local node's version.
	Version Version
	// MinimumReconcilerRelease is the lowest release the last reconciler
	// must have for the local node to pass WaitReady: raise it when the
	// local release needs reconciled state that older reconcilers do not
	// write.
	MinimumReconcilerRelease Release
	// MinimumCompatibleRelease is the lowest node release compatible with
	// the state the local release reconciles to. A leader writes it into
	// the status, and does not reconcile while a member node below it
	// exists. It must not exceed the local release.
	MinimumCompatibleRelease Release
	// Decode decodes host-owned node records. When nil the gate owns the
	// records: Run publishes the local node's record under ID NodeID,
	// bound to a lease of RecordTTL, so a dead node's record disappears.
	Decode DecodeFunc
	// RecordTTL is the lease TTL of the published record (whole seconds,
	// at least one; default 10s). Unused when Decode is set.
	RecordTTL time.Duration

	// Candidate campaigns on the host's election; required by Run.
	Candidate Candidate
	// Reconcile is the leader-only reconcile; required by Run.
	Reconcile ReconcileFunc
	// SettleTime is how long a leader waits before its first reconcile
	// when a status shows an earlier reconciler, so requests of a deposed
	// leader still in flight land first (default 5s; negative: no wait).
	//
	// It is not what protects a node that is cut off: with gate-owned
	// records such a node stops serving at its record's local deadline,
	// before the server expires the record, so before a leader can see it
	// gone at all (measured on real etcd with default settings: the old
	// node stopped about 1s before the expiry, and the new leader
	// reconciled SettleTime after that). What SettleTime covers is the
	// rest of the worst case: writes the deposed leader sent before its
	// term ended locally and that reach a target not fenced by the token.
	// Keep it above the network delay to such targets.
	SettleTime time.Duration
	// ReconcileInterval is the period of the reconcile after the initial
	// one (default 30s).
	ReconcileInterval time.Duration
	// ReconcileJitter randomises each period by up to this fraction
	// (0 to 1; default 0).
	ReconcileJitter float64
	// Clock is used for every wait but the record's validity; nil means the
	// real clock.
	Clock clock.Clock
	// Metrics receives the gate's observations (see Observation); nil
	// means none.
	Metrics Metrics
	// Events receives Kubernetes-style events: Restricting, Restricted,
	// UpgradeDone, RecordLost, FencedOff and StatusMissing (see the Reason
	// constants); nil means none.
	Events EventRecorder
	// Conditions, if not nil, receives the gate's readiness as a node
	// condition of type ConditionType: True (ReasonReleaseAdmitted) when
	// WaitReady would return now, that is the node record is valid and the
	// status admits the local release; False otherwise, with the reason
	// (ReasonRecordPending, ReasonRecordLost, ReasonStatusPending,
	// ReasonStatusCorrupt, ReasonStatusNotAdmitting, ReasonGateStopped).
	// It is reported at every change, from a goroutine of Run's own, and
	// never blocks the gate (see ConditionReporter). nodestatus.Provider
	// takes it as it is.
	Conditions ConditionReporter
	// ConditionType is the type of the condition reported to Conditions
	// (default ConditionReleaseReady).
	ConditionType string
	// RejoinAfterRecordLoss makes Run publish a new record, with backoff,
	// after the node record was lost, instead of returning ErrRecordLost.
	// On the loss the node stops serving exactly as without it: the
	// term, if any, is resigned after the reconcile returned, Ready turns
	// false, WaitReady returns ErrRecordLost, the condition turns False
	// (ReasonRecordLost), and the RecordLost event and observation are
	// sent. Then Run starts over (publishing the record, which waits
	// until the lost one has expired, watching, campaigning); the node
	// serves again once a new WaitReady returned, as the condition shows.
	// Default false: Run returns the error wrapping ErrRecordLost and the
	// host decides. Unused when Decode is set.
	RejoinAfterRecordLoss bool
	// RecordClock measures the published record's local validity deadline
	// and paces its keep-alives. The server expires the record in real
	// time, so this must run at the real rate; nil means the real clock.
	// Unused when Decode is set.
	RecordClock clock.Clock
	// Rand seeds the jitter of every pause of the gate (its retries, the
	// record's renewal retries, the pauses before watching or publishing
	// again, the periodic reconcile's ReconcileJitter): New draws from
	// it, on its caller's goroutine, the seeds of one source for each of
	// the gate's goroutines (and one for WaitReady), so that their draws
	// do not depend on the order in which they run. It returns values
	// uniformly in [0, 1); nil means every pause draws from math/rand/v2's
	// global source. A host that wants reproducible pauses (a simulator
	// replaying a seed) sets it; the store's own pauses are the Store's
	// (kubestore.Config.Rand).
	Rand func() float64
}

// Gate runs the reconciler for one node and gates the node's start-up on
// the reconciler status. Create it with New; its methods are safe for
// concurrent use.
type Gate struct {
	// rand is a source of its own for each of the gate's goroutines
	// (split from Config.Rand in New; all nil without it): goroutines
	// that wake at one instant run in either order, and would take each
	// other's draws from one source.
	rand        struct{ rejoin, record, nodes, lead, ready func() float64 }
	cfg         Config
	clock       clock.Clock
	recordClock clock.Clock

	releases event.Value[Releases]
	tracker  *tracker
	// record is the state of the local node record (gate-owned records
	// only).
	record event.Value[recordState]
	// validUntil is the record's local validity deadline on recordClock,
	// kept beside record so that Ready judges the deadline itself, at the
	// moment it is asked, rather than trusting the keep-alive loop's timer
	// to have fired on time (a starved process runs it late).
	validUntil atomic.Pointer[time.Time]
	// beforeRecordRead, if not nil, is called by the goroutine that
	// waitRecord starts before each of its reads of record. Only tests
	// set it (export_test.go), before Run and WaitReady, to hold that
	// goroutine back as a starved one is held; nil otherwise.
	beforeRecordRead func()
	// afterReady, if not nil, is called by WaitReady right after it set
	// ready, before it checks the record again. Only tests set it
	// (export_test.go), to ask Ready at that moment; nil otherwise.
	afterReady func()

	running atomic.Bool
	ready   atomic.Bool // WaitReady succeeded and the record is still valid
	// readyRev is the revision of the record for which WaitReady last
	// succeeded (set before ready): Ready holds only while the local
	// record is still that one, so a WaitReady whose status read proves
	// nothing for a record published since never makes it true, not even
	// for the moment between setting ready and clearing it again.
	readyRev  atomic.Int64
	leading   atomic.Bool
	leadingCh notifier
	phaseCh   notifier
	phase     atomic.Value // Phase
	statusMu  sync.Mutex
	statusErr error
	// fencedOff identifies the fence-ahead condition last reported as a
	// FencedOff warning; nil once a Fence succeeded.
	fencedOff atomic.Pointer[string]
}

// New validates cfg, fills defaults and returns a Gate.
func New(cfg Config) (*Gate, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if cfg.Store == nil {
		bad("Store is nil")
	}
	if cfg.NodeID == "" {
		bad("NodeID is empty")
	}
	if strings.Contains(cfg.NodeID, "/") && cfg.Decode == nil {
		bad("NodeID %q contains '/'", cfg.NodeID)
	}
	if cfg.Version.Release.Less(cfg.MinimumCompatibleRelease) {
		bad("MinimumCompatibleRelease %s exceeds the local release %s", cfg.MinimumCompatibleRelease, cfg.Version.Release)
	}
	if cfg.RecordTTL == 0 {
		cfg.RecordTTL = DefaultRecordTTL
	}
	if cfg.RecordTTL < time.Second || cfg.RecordTTL%time.Second != 0 {
		bad("RecordTTL %v is not a whole number of seconds >= 1s", cfg.RecordTTL)
	}
	if cfg.SettleTime == 0 {
		cfg.SettleTime = DefaultSettleTime
	}
	if cfg.ReconcileInterval == 0 {
		cfg.ReconcileInterval = DefaultReconcileInterval
	}
	if cfg.ReconcileInterval < 0 {
		bad("ReconcileInterval %v is negative", cfg.ReconcileInterval)
	}
	if cfg.ReconcileJitter < 0 || cfg.ReconcileJitter > 1 {
		bad("ReconcileJitter %v is outside [0, 1]", cfg.ReconcileJitter)
	}
	if cfg.ConditionType == "" {
		cfg.ConditionType = ConditionReleaseReady
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	g := &Gate{cfg: cfg, clock: cfg.Clock}
	for _, r := range []*func() float64{&g.rand.rejoin, &g.rand.record, &g.rand.nodes, &g.rand.lead, &g.rand.ready} {
		*r = jitter.Split(cfg.Rand)
	}
	if g.clock == nil {
		g.clock = clock.RealClock{}
	}
	g.recordClock = cfg.RecordClock
	if g.recordClock == nil {
		g.recordClock = clock.RealClock{}
	}
	decode := cfg.Decode
	if decode == nil {
		decode = publishedDecoder
	}
	g.tracker = newTracker(cfg.Version.Release, cfg.MinimumCompatibleRelease, decode, &g.releases)
	g.tracker.onBlocking = g.observeBlocking
	g.phase.Store(PhaseIdle)
	return g, nil
}

// Releases returns the newest summary of the member nodes' releases, and
// false before the first listing completed.
func (g *Gate) Releases() (Releases, bool) { return g.releases.Load() }

// Blocking returns the member nodes, by ID and release, whose release is
// below the local MinimumCompatibleRelease, sorted by ID. While this node
// leads and the status admits such releases, these are the nodes the gate
// waits for before it reconciles: an upgrade that does not progress is
// explained here. It reflects the watcher's newest view and is empty
// before Run listed the nodes.
func (g *Gate) Blocking() []Node { return g.tracker.blockingNodes() }

// Phase says what a gate's reconciler is doing.
type Phase string

// Phases reported by [Gate.Phase].
const (
	PhaseIdle        Phase = "idle"        // not campaigning: not running, or not the newest release
	PhaseCampaigning Phase = "campaigning" // newest release, waiting to lead
	PhaseRestricting Phase = "restricting" // leading, waiting for incompatible nodes to go
	PhaseSettling    Phase = "settling"    // leading, waiting SettleTime
	PhaseReconciling Phase = "reconciling" // leading, initial reconcile
	PhaseDone        Phase = "done"        // leading, initial reconcile done, periodic reconcile
)

// Phase reports what the gate's reconciler is doing, for operators.
func (g *Gate) Phase() Phase { return g.phase.Load().(Phase) }

// setPhase records a new phase and reports it.
func (g *Gate) setPhase(p Phase) {
	if old, _ := g.phase.Swap(p).(Phase); old != p {
		// Observed before the waiters wake, so that one woken by
		// PhaseChanged finds the phase's observation made.
		g.observe(Observation{Event: EventPhase})
		g.phaseCh.notify()
	}
}

// PhaseChanged returns a channel that is closed when Phase next changes;
// read Phase after it is closed and call PhaseChanged again for the change
// after that. Hosts and tests follow the phase with it instead of polling.
func (g *Gate) PhaseChanged() <-chan struct{} { return g.phaseCh.changed() }

// Leading reports, without a request, whether this gate currently holds a
// term (from Campaign's return until the gate resigned it).
func (g *Gate) Leading() bool { return g.leading.Load() }

// LeadingChanged returns a channel that is closed when Leading next
// changes; read Leading after it is closed and call LeadingChanged again
// for the change after that.
func (g *Gate) LeadingChanged() <-chan struct{} { return g.leadingCh.changed() }

func (g *Gate) setLeading(v bool) {
	g.leading.Store(v)
	g.leadingCh.notify()
}

// Ready reports, without a request, whether the local node may serve: a
// WaitReady has returned nil and, when the gate owns the records, the
// node's record is still the one that WaitReady waited on (not one
// published again since) and has stayed valid by its local deadline since
// it was published. It turns false the moment the record is lost, before the
// server can expire it; the host then waits in WaitReady again. It judges
// the record's local deadline itself when called, so it is false from the
// deadline on even when the gate's own goroutines run late (a starved or
// paused process notices the loss late, but never reports ready past it).
func (g *Gate) Ready() bool {
	if !g.ready.Load() {
		return false
	}
	if g.cfg.Decode != nil {
		return true
	}
	st, _ := g.record.Load()
	return st.rev == g.readyRev.Load() && g.recordValid(st)
}

// recordValid reports whether st is a valid record whose local validity
// deadline has not passed now.
func (g *Gate) recordValid(st recordState) bool {
	if !st.valid {
		return false
	}
	until := g.validUntil.Load()
	return until != nil && g.recordClock.Now().Before(*until)
}

// StatusError returns the decode error of the last stored status this gate
// read, or nil if that status was valid or absent. A corrupt status is
// treated as absent: a leader reconciles once no incompatible node has a
// record, and overwrites it; WaitReady waits.
func (g *Gate) StatusError() error {
	g.statusMu.Lock()
	defer g.statusMu.Unlock()
	return g.statusErr
}

func (g *Gate) setStatusError(err error) {
	g.statusMu.Lock()
	g.statusErr = err
	g.statusMu.Unlock()
}

// Run watches the node records, publishes the local node's record when the
// gate owns them, and campaigns and reconciles while the local node has the
// newest release. It blocks until every goroutine it started has exited,
// and returns nil when ctx ends, or an error wrapping ErrRecordLost (unless
// Config.RejoinAfterRecordLoss is set: then it publishes a new record and
// goes on). It resigns any term it holds, after its reconcile returned,
// before returning. After it returned it may be called again (after
// ErrRecordLost the record is published anew); two Runs at once fail with
// ErrAlreadyRunning.
func (g *Gate) Run(ctx context.Context) error {
	if !g.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer g.running.Store(false)
	if g.cfg.Candidate == nil || g.cfg.Reconcile == nil {
		return fmt.Errorf("%w: Run needs Candidate and Reconcile", ErrInvalidConfig)
	}
	if g.cfg.Conditions == nil {
		return g.runRejoining(ctx)
	}
	c := &conditionReporter{r: g.cfg.Conditions, typ: g.cfg.ConditionType}
	fctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.followReadiness(fctx, c)
	}()
	err := g.runRejoining(ctx)
	stop()
	<-done
	c.final(err)
	return err
}

// runRejoining runs the gate once, or, with RejoinAfterRecordLoss, again
// after each loss of the record, waiting between runs from pauseBase
// doubling up to RecordTTL, and from pauseBase again after a run that kept
// its record for at least RecordTTL; each wait grows by up to half of
// itself at random (jittered), so that nodes that lost their records
// together (a server restart, a store outage) do not publish together.
func (g *Gate) runRejoining(ctx context.Context) error {
	if !g.cfg.RejoinAfterRecordLoss || g.cfg.Decode != nil {
		return g.runOnce(ctx)
	}
	log := logr.FromContextOrDiscard(ctx)
	wait := pauseBase
	for {
		start := g.clock.Now()
		err := g.runOnce(ctx)
		if !errors.Is(err, ErrRecordLost) {
			return err
		}
		if g.clock.Since(start) >= g.cfg.RecordTTL {
			wait = pauseBase
		}
		pause := jittered(g.rand.rejoin, wait)
		log.Info("Node record lost; publishing a new one", "err", err.Error(), "after", pause.String())
		t := g.clock.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
		wait = min(2*wait, g.cfg.RecordTTL)
	}
}

// jittered is d plus up to half of it, at random: the pause of a loop
// that every node of a fleet may start at one instant (after a server
// restart, a store outage), so that they do not retry in step. It draws
// from r (Config.Rand).
func jittered(r func() float64, d time.Duration) time.Duration {
	return d + time.Duration(jitter.Int64N(r, int64(d/2)+1))
}

// runOnce publishes the record, watches and campaigns until ctx ends or
// one of them fails.
func (g *Gate) runOnce(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := fn(ctx)
			if err != nil && ctx.Err() == nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("%s: %w", name, err)
				}
				mu.Unlock()
				cancel(err)
			}
		}()
	}
	if g.cfg.Decode == nil {
		start("publish node record", g.publishRecord)
	}
	start("watch nodes", func(ctx context.Context) error { return g.tracker.run(ctx, g.cfg.Store, g.clock, g.rand.nodes) })
	start("campaign", g.campaignWhileNewest)
	wg.Wait()
	return firstErr
}

// notifier is a channel closed and replaced at every change.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func (n *notifier) changed() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

func (n *notifier) notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}
