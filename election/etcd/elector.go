package etcd

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/internal/term"
)

// Defaults of Config.
const (
	// DefaultSessionTTL is the TTL of the etcd lease behind each term.
	//
	// It bounds crash failover: a leader that dies without releasing is
	// replaced after at most this long plus a round trip. Ten seconds, not
	// etcd's 60, keeps that wait short, and still rides out an etcd leader
	// election (about a second with etcd's defaults; the new etcd leader
	// also extends every lease when it takes over) and a few lost
	// keepalives, which are sent every TTL/3. Lower it for faster
	// failover on a fast, quiet network; raise it where etcd or the
	// process may stall for seconds, since a stall longer than TTL less
	// the margin ends the term.
	DefaultSessionTTL = 10 * time.Second
	// DefaultReleaseTimeout bounds the lease revokes the elector sends by
	// itself: after a loss, and for a term won as the elector closed. It
	// is short so that shutdown is not held up by an
	// unreachable etcd; if it fails the lease simply expires after the TTL.
	DefaultReleaseTimeout = 2 * time.Second
)

// Config configures an Elector.
type Config struct {
	// Client is the etcd client. Required. The elector does not close it.
	Client *clientv3.Client
	// Prefix is the election's key prefix. Required. Candidates put their
	// keys under Prefix + "/", named by their lease ID in hex, with their
	// identity as value: the layout of etcd's concurrency.Election, so
	// candidates of both kinds (and etcdctl elect) can share one election
	// safely.
	Prefix string
	// Identity names this candidate. Empty means election.DefaultIdentity(). It must
	// be valid UTF-8 without control characters, at most 1024 bytes, and
	// unique among the candidates.
	Identity string
	// SessionTTL is the lease TTL of each term, a whole number of seconds,
	// at least 2s. Zero means DefaultSessionTTL.
	SessionTTL time.Duration
	// ReleaseTimeout bounds the revokes the elector sends by itself. Zero means
	// DefaultReleaseTimeout.
	ReleaseTimeout time.Duration
	// Clock measures term validity. Nil means the real clock.
	Clock clock.Clock
	// Rand draws the jitter of the elector's pauses (renewal retries,
	// re-watches, the retries of Campaign's and Observe's watches),
	// uniformly in [0, 1); nil means math/rand/v2's Float64. It is called
	// from Campaign's caller, from Observe's goroutine and from each term's
	// monitor goroutine, possibly at once, so it must be safe for
	// concurrent use.
	Rand func() float64
	// Metrics receives an election.Observation at every acquisition, renewal
	// attempt, loss and resignation (Backend "etcd", Election the
	// prefix). Nil means none. A term's end is reported after its start,
	// even when the term ends at once; a term won just as the elector
	// closed, which Campaign never returns, is reported neither.
	Metrics election.Metrics
	// Events receives LeaderElected, LeadershipLost (Warning) and
	// Resigned events. Nil means none.
	Events election.EventRecorder
}

// Elector is a candidate in an election on etcd. Create it with
// New; it is safe for concurrent use. Close it when done.
//
// Each Campaign grants a fresh lease, keeps it alive with a
// concurrency.Session, and puts the candidate's key under the prefix; the
// candidate whose key has the lowest create revision leads. The term ends
// when the key is deleted, the lease expires, or the lease cannot be
// renewed before ValidUntil, whichever this candidate notices first.
type Elector struct {
	client         *clientv3.Client
	keyPrefix      string
	identity       string
	ttl            time.Duration
	releaseTimeout time.Duration
	margin         time.Duration
	clock          clock.Clock
	rand           func() float64 // Config.Rand
	report         term.Reporter

	ctx    context.Context // ends on Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu          sync.Mutex
	closed      bool
	campaigning bool
	cur         *Leadership

	leading term.Flag

	// termStarted, when not nil, is called on Campaign's goroutine just
	// after a term's renewal and monitor loops started, before Campaign
	// returns the term: from then on the term may end by itself. Only this
	// package's tests set it, before the first Campaign, to end a term at
	// that moment.
	termStarted func(*Leadership)
}

var (
	_ election.Elector    = (*Elector)(nil)
	_ election.TermHolder = (*Elector)(nil)
)

// New validates cfg, fills its defaults and returns an elector.
func New(cfg Config) (*Elector, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("%w: etcd Client is nil", election.ErrInvalidConfig)
	}
	if strings.TrimRight(cfg.Prefix, "/") == "" {
		return nil, fmt.Errorf("%w: etcd Prefix %q is empty", election.ErrInvalidConfig, cfg.Prefix)
	}
	if cfg.Identity == "" {
		cfg.Identity = election.DefaultIdentity()
	}
	if err := validateIdentity(cfg.Identity); err != nil {
		return nil, fmt.Errorf("%w: Identity: %w", election.ErrInvalidConfig, err)
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.SessionTTL < 2*time.Second || cfg.SessionTTL%time.Second != 0 {
		return nil, fmt.Errorf("%w: SessionTTL %v must be a whole number of seconds, at least 2s", election.ErrInvalidConfig, cfg.SessionTTL)
	}
	if cfg.ReleaseTimeout == 0 {
		cfg.ReleaseTimeout = DefaultReleaseTimeout
	}
	if cfg.ReleaseTimeout < 0 {
		return nil, fmt.Errorf("%w: ReleaseTimeout %v is negative", election.ErrInvalidConfig, cfg.ReleaseTimeout)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Elector{
		client:         cfg.Client,
		keyPrefix:      cfg.Prefix + "/",
		identity:       cfg.Identity,
		ttl:            cfg.SessionTTL,
		releaseTimeout: cfg.ReleaseTimeout,
		margin:         etcdMargin(cfg.SessionTTL),
		clock:          cfg.Clock,
		rand:           cfg.Rand,
		report: term.Reporter{
			Metrics: cfg.Metrics, Events: cfg.Events,
			Backend: "etcd", Election: cfg.Prefix, Identity: cfg.Identity,
		},
		ctx:    ctx,
		cancel: cancel,
	}, nil
}

// etcdMargin is how much earlier than the server could expire the lease
// the candidate gives up its term: a tenth of the TTL, at least 500ms, for
// a difference in clock rates and for the latency of noticing.
func etcdMargin(ttl time.Duration) time.Duration {
	return max(ttl/10, 500*time.Millisecond)
}

// track adds n goroutines to the wait group, unless the elector is closed.
func (e *Elector) track(n int) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.wg.Add(n)
	return true
}

// Identity implements election.Elector.
func (e *Elector) Identity() string { return e.identity }

// Leading reports, without a request, whether this candidate holds a term
// that is valid now: its context is live and the clock is before its
// ValidUntil.
func (e *Elector) Leading() bool {
	_, ok := e.CurrentEtcd()
	return ok
}

// Current implements election.TermHolder: the term this candidate holds,
// while Leading reports true.
func (e *Elector) Current() (election.Leadership, bool) {
	l, ok := e.CurrentEtcd()
	if !ok {
		return nil, false
	}
	return l, true
}

// CurrentEtcd is Current returning the concrete etcd term, for a host
// that needs its Guard or Txn, as CampaignEtcd is to Campaign.
func (e *Elector) CurrentEtcd() (*Leadership, bool) {
	e.mu.Lock()
	cur := e.cur
	e.mu.Unlock()
	if cur == nil || !cur.ValidNow() {
		return nil, false
	}
	return cur, true
}

// LeadingChanged returns a channel that is closed when this candidate next
// starts or ends a term; read Leading after it is closed, and call
// LeadingChanged again for the change after that. It costs no request and
// no goroutine.
func (e *Elector) LeadingChanged() <-chan struct{} { return e.leading.Changed() }

// Close ends the current term, if any, at once with cause
// election.ErrClosed and stops keeping its lease alive, but does not
// revoke it: a term is never released behind its holder's back. The
// holder's Resign, which Run sends once lead returned, revokes it (the
// client must still be open); a term never resigned ends when its lease
// expires, at most SessionTTL after its last renewal, as a crashed
// holder's would. To hand over at once on shutdown, end Run's context (or
// Resign) before Close.
//
// Close also aborts pending Campaigns and Observes and waits for every
// goroutine the elector started. Later Campaigns return
// election.ErrClosed. Close is idempotent and returns nil.
func (e *Elector) Close() error {
	e.mu.Lock()
	e.closed = true
	cur := e.cur
	e.mu.Unlock()
	if cur != nil {
		cur.core.Close()
	}
	e.cancel()
	e.wg.Wait()
	return nil
}

// HealthCheck returns the leadership health check of e with the given
// grace (see election.NewHealthCheck).
func (e *Elector) HealthCheck(grace time.Duration) *election.HealthCheck {
	return election.NewHealthCheck(func() election.Leadership {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.cur != nil {
			return e.cur
		}
		return nil
	}, e.clock, grace)
}
