package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/internal/event"
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

// maxIdentityLen bounds identities written to and read from etcd.
const maxIdentityLen = 1024

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
	// Metrics receives an election.Observation at every acquisition, renewal
	// attempt, loss and resignation (Backend "etcd", Election the
	// prefix). Nil means none.
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
	report         term.Reporter

	ctx    context.Context // ends on Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu          sync.Mutex
	closed      bool
	campaigning bool
	cur         *Leadership

	leading term.Flag
}

var _ election.Elector = (*Elector)(nil)

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
	e.mu.Lock()
	cur := e.cur
	e.mu.Unlock()
	return cur != nil && !cur.term.Ended() && e.clock.Now().Before(cur.ValidUntil())
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
		cur.term.Close()
	}
	e.cancel()
	e.wg.Wait()
	return nil
}

// Campaign implements election.Elector. It returns an error at once if this
// candidate already campaigns or leads, and election.ErrClosed after Close.
//
// When the wait ends, Campaign renews the lease and checks that its key
// still exists with its create revision before it returns the term: etcd's
// concurrency.Election.Campaign returns success even when the session
// expired while it waited (etcd issue 19597); this one returns an error
// wrapping election.ErrLeadershipLost instead.
func (e *Elector) Campaign(ctx context.Context) (election.Leadership, error) {
	l, err := e.CampaignEtcd(ctx)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// CampaignEtcd is Campaign returning the concrete etcd term, for hosts that
// need its Guard or Txn (a version gate's guarded status writes, say)
// without a type assertion.
func (e *Elector) CampaignEtcd(ctx context.Context) (*Leadership, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("election: campaign: %w", err)
	}
	e.mu.Lock()
	switch {
	case e.closed:
		e.mu.Unlock()
		return nil, election.ErrClosed
	case e.campaigning || (e.cur != nil && !e.cur.term.Ended()):
		e.mu.Unlock()
		return nil, fmt.Errorf("election: campaign: %s already campaigns or leads", e.identity)
	}
	e.campaigning = true
	e.mu.Unlock()
	begun := e.clock.Now()
	defer func() {
		e.mu.Lock()
		e.campaigning = false
		e.mu.Unlock()
	}()

	// The wait also ends when the elector closes.
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(e.ctx, func() { cancel(election.ErrClosed) })
	defer stop()

	l, vacated, err := e.campaignOnce(cctx, ctx)
	if err != nil {
		if errors.Is(context.Cause(cctx), election.ErrClosed) {
			return nil, election.ErrClosed
		}
		return nil, fmt.Errorf("election: campaign: %w", err)
	}
	e.mu.Lock()
	closed := e.closed
	if !closed {
		e.cur = l
		e.leading.Follow(l.term.Context())
	}
	e.mu.Unlock()
	if closed {
		_ = l.term.ReleaseDetached(election.ErrClosed, e.releaseTimeout)
		return nil, election.ErrClosed
	}
	now := e.clock.Now()
	var handover time.Duration
	if !vacated.IsZero() {
		handover = now.Sub(vacated)
	}
	e.report.Acquired(l.term.Token(), now.Sub(begun), handover)
	return l, nil
}

// campaignOnce runs one campaign on a fresh lease: cctx bounds the wait,
// parent lends the term its values (the logger), not its cancellation. It
// also returns when the last predecessor's key was seen deleted (zero if
// there was none).
func (e *Elector) campaignOnce(cctx, parent context.Context) (l *Leadership, vacated time.Time, err error) {
	log := logr.FromContextOrDiscard(parent).WithValues("identity", e.identity)
	grant, err := e.client.Grant(cctx, int64(e.ttl/time.Second))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("grant lease: %w", err)
	}
	lease := grant.ID
	// The session keeps the lease alive until the term's cleanup orphans
	// it, or the elector closes.
	sess, err := concurrency.NewSession(e.client, concurrency.WithLease(lease), concurrency.WithContext(e.ctx))
	if err != nil {
		e.revoke(log, lease)
		return nil, time.Time{}, fmt.Errorf("start session: %w", err)
	}
	defer func() {
		if err != nil {
			sess.Orphan()
			e.revoke(log, lease)
		}
	}()

	key := e.keyPrefix + strconv.FormatInt(int64(lease), 16)
	resp, err := e.client.Txn(cctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, e.identity, clientv3.WithLease(lease))).
		Commit()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("put candidate key: %w", err)
	}
	if !resp.Succeeded {
		return nil, time.Time{}, fmt.Errorf("candidate key %s exists already", key)
	}
	rev := resp.Header.Revision

	// Wait until every key created before ours is gone, or the session
	// dies (then ours is gone too).
	wctx, wcancel := context.WithCancelCause(cctx)
	defer wcancel(nil)
	stopSess := context.AfterFunc(sess.Ctx(), func() {
		wcancel(fmt.Errorf("%w: session ended while waiting", election.ErrLeadershipLost))
	})
	defer stopSess()
	vacated, err = e.waitDeletes(wctx, rev-1)
	if err != nil {
		if cause := context.Cause(wctx); cause != nil && cctx.Err() == nil {
			return nil, time.Time{}, cause
		}
		return nil, time.Time{}, err
	}

	// Confirm: renew the lease (so the term's validity starts from now)
	// and check that the key is still ours.
	start := e.clock.Now()
	validUntil, seen, err := e.confirm(cctx, key, rev, lease, start)
	if err != nil {
		return nil, time.Time{}, err
	}

	l = &Leadership{e: e, key: key, rev: rev, seen: seen, lease: lease, sess: sess, log: log}
	l.validUntil = validUntil
	l.term = term.New(parent, e.identity, election.Token(rev), l.release)
	l.renewed = make(chan struct{}, 1)
	if !e.track(2) {
		return nil, time.Time{}, election.ErrClosed // the deferred cleanup releases
	}
	go l.keep()
	go l.monitor()
	log.V(1).Info("Elected", "key", key, "token", rev)
	return l, vacated, nil
}

// confirm renews the lease and checks that key still exists with create
// revision rev on that lease. It returns the instant until which the term
// is known valid (start + TTL - margin) and the revision at which the key
// was seen.
func (e *Elector) confirm(ctx context.Context, key string, rev int64, lease clientv3.LeaseID, start time.Time) (time.Time, int64, error) {
	ka, err := e.client.KeepAliveOnce(ctx, lease)
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return time.Time{}, 0, fmt.Errorf("%w: lease expired", election.ErrLeadershipLost)
		}
		return time.Time{}, 0, fmt.Errorf("renew lease: %w", err)
	}
	resp, err := e.client.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(key), "=", rev),
		clientv3.Compare(clientv3.LeaseValue(key), "=", lease),
	).Commit()
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("check candidate key: %w", err)
	}
	if !resp.Succeeded {
		return time.Time{}, 0, fmt.Errorf("%w: candidate key %s is gone", election.ErrLeadershipLost, key)
	}
	ttl := time.Duration(ka.TTL) * time.Second
	return start.Add(ttl - e.margin), resp.Header.Revision, nil
}

// waitDeletes waits until no key under the prefix has a create revision
// up to maxRev (the keys of the candidates ahead). It returns when it saw
// the last of them deleted, zero if there was none.
func (e *Elector) waitDeletes(ctx context.Context, maxRev int64) (time.Time, error) {
	opts := append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(maxRev), clientv3.WithKeysOnly())
	var vacated time.Time
	for {
		resp, err := e.client.Get(ctx, e.keyPrefix, opts...)
		if err != nil {
			return time.Time{}, err
		}
		if len(resp.Kvs) == 0 {
			return vacated, nil
		}
		// Watch from the next revision: a watch that starts at or below
		// the current one is served by etcd's catch-up loop, every 100ms.
		if err := e.waitDelete(ctx, string(resp.Kvs[0].Key), resp.Header.Revision+1); err != nil {
			return time.Time{}, err
		}
		vacated = e.clock.Now()
	}
}

func (e *Elector) waitDelete(ctx context.Context, key string, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range e.client.Watch(wctx, key, clientv3.WithRev(rev)) {
		if err := wr.Err(); err != nil {
			return err
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("watch ended while waiting for a predecessor's key to go")
}

// revoke revokes lease within the release timeout, logging failures.
func (e *Elector) revoke(log logr.Logger, lease clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), e.releaseTimeout)
	defer cancel()
	if _, err := e.client.Revoke(ctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		log.V(1).Info("Revoking the lease failed; it expires by its TTL", "lease", fmt.Sprintf("%x", int64(lease)), "error", err)
	}
}

// Leader implements election.Elector: the candidate whose key under the prefix has
// the lowest create revision leads; its token is that revision.
func (e *Elector) Leader(ctx context.Context) (election.LeaderInfo, error) {
	resp, err := e.client.Get(ctx, e.keyPrefix, clientv3.WithFirstCreate()...)
	if err != nil {
		return election.LeaderInfo{}, fmt.Errorf("election: leader: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return election.LeaderInfo{}, election.ErrNoLeader
	}
	return leaderOf(resp.Kvs[0]), nil
}

func leaderOf(kv *mvccpb.KeyValue) election.LeaderInfo {
	return election.LeaderInfo{Identity: decodeIdentity(kv.Value), Token: election.Token(kv.CreateRevision)}
}

// Observe implements election.Elector. It lists the prefix, then watches it and
// reads the leader again after every change; when the watch fails it lists
// and watches again after a backoff. Observe's goroutines end when ctx
// ends or the elector closes.
func (e *Elector) Observe(ctx context.Context) <-chan election.LeaderInfo {
	ch := make(chan election.LeaderInfo)
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(e.ctx, cancel)
	var v event.Value[election.LeaderInfo]
	if !e.track(2) {
		cancel()
		stop()
		close(ch)
		return ch
	}
	go func() {
		defer e.wg.Done()
		defer cancel()
		defer stop()
		e.follow(ctx, &v)
	}()
	go func() {
		defer e.wg.Done()
		defer close(ch)
		forward(ctx, &v, ch)
	}()
	return ch
}

// follow keeps v set to the current leader until ctx ends.
func (e *Elector) follow(ctx context.Context, v *event.Value[election.LeaderInfo]) {
	for ctx.Err() == nil {
		_ = backoff.Retry(ctx, func(ctx context.Context) error {
			return e.followOnce(ctx, v)
		}, backoff.WithMaxInterval(2*time.Second), backoff.WithClock(e.clock), backoff.WithName("election observe"))
	}
}

// followOnce lists and watches until the watch fails. It returns nil
// (starting the backoff anew) if the watch had been healthy for a while.
func (e *Elector) followOnce(ctx context.Context, v *event.Value[election.LeaderInfo]) error {
	read := func() (int64, error) {
		resp, err := e.client.Get(ctx, e.keyPrefix, clientv3.WithFirstCreate()...)
		if err != nil {
			return 0, err
		}
		info := election.LeaderInfo{}
		if len(resp.Kvs) > 0 {
			info = leaderOf(resp.Kvs[0])
		}
		if old, ok := v.Load(); !ok || old != info {
			v.Set(info)
		}
		return resp.Header.Revision, nil
	}
	rev, err := read()
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	start := e.clock.Now()
	failed := func(err error) error {
		if ctx.Err() != nil || e.clock.Since(start) >= 10*time.Second {
			return nil
		}
		return err
	}
	for wr := range e.client.Watch(wctx, e.keyPrefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithKeysOnly()) {
		if err := wr.Err(); err != nil {
			return failed(fmt.Errorf("watch: %w", err))
		}
		if len(wr.Events) == 0 {
			continue
		}
		if _, err := read(); err != nil {
			return failed(err)
		}
	}
	return failed(errors.New("watch ended"))
}

// forward sends v's states to ch, never blocking the writer of v and
// always delivering the newest state last. It skips a state equal to the
// one sent before.
func forward(ctx context.Context, v *event.Value[election.LeaderInfo], ch chan<- election.LeaderInfo) {
	w := v.Watch()
	defer w.Close()
	var last election.LeaderInfo
	sent := false
	for {
		info, err := w.Get(ctx)
		if err != nil {
			return
		}
		if sent && info == last {
			continue
		}
		select {
		case ch <- info:
			last, sent = info, true
		case <-ctx.Done():
			return
		}
	}
}

// Leadership is a term on etcd. Besides election.Leadership and election.Expiring it
// offers the comparison and transactions that make etcd itself refuse a
// write once the term has ended.
type Leadership struct {
	term  *term.Term
	e     *Elector
	key   string
	rev   int64
	seen  int64 // a revision at which the key was confirmed
	lease clientv3.LeaseID
	sess  *concurrency.Session
	log   logr.Logger

	mu         sync.Mutex
	validUntil time.Time // guarded by mu; keeps the monotonic reading
	renewed    chan struct{}
}

var (
	_ election.Leadership = (*Leadership)(nil)
	_ election.Expiring   = (*Leadership)(nil)
)

// Key returns the candidate's key, Prefix + "/" + lease ID in hex.
func (l *Leadership) Key() string { return l.key }

// Lease returns the etcd lease the term's key is attached to.
func (l *Leadership) Lease() clientv3.LeaseID { return l.lease }

// ValidUntil implements election.Expiring: the start of the last successful lease
// renewal plus the TTL, less a margin (a tenth of the TTL, at least
// 500ms). The term ends then unless a renewal succeeded in between.
func (l *Leadership) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// Guard returns the comparison that holds exactly while this term's key
// exists: CreateRevision(Key()) == Token(). Put it in the If of every
// leader-only transaction.
func (l *Leadership) Guard() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)
}

// Txn returns a transaction whose If always includes Guard, whether or not
// the caller calls If. Its Commit returns an error wrapping election.ErrNotLeader,
// without a round trip, when the term is known to have ended; otherwise a
// response with Succeeded false means the guard or one of the caller's
// comparisons failed (use GuardedTxn to tell which).
func (l *Leadership) Txn(ctx context.Context) clientv3.Txn {
	return &guardedTxn{l: l, txn: l.e.client.Txn(ctx)}
}

// GuardedTxn runs a transaction under the guard: if cmps all hold, thenOps
// run, else elseOps, exactly as a plain transaction; but if the term has
// ended it returns an error wrapping election.ErrNotLeader, and nothing runs. The
// response is that of the inner transaction.
func (l *Leadership) GuardedTxn(ctx context.Context, cmps []clientv3.Cmp, thenOps, elseOps []clientv3.Op) (*clientv3.TxnResponse, error) {
	if err := l.notLeader(); err != nil {
		return nil, err
	}
	resp, err := l.e.client.Txn(ctx).If(l.Guard()).Then(clientv3.OpTxn(cmps, thenOps, elseOps)).Commit()
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		return nil, fmt.Errorf("%w: term %d of %s has ended in etcd", election.ErrNotLeader, l.rev, l.Identity())
	}
	inner := (*clientv3.TxnResponse)(resp.Responses[0].GetResponseTxn())
	if inner == nil {
		return nil, errors.New("election: guarded transaction: no inner response")
	}
	inner.Header = resp.Header
	return inner, nil
}

// notLeader returns an error wrapping election.ErrNotLeader if the term has ended.
func (l *Leadership) notLeader() error {
	if l.term.Ended() {
		return fmt.Errorf("%w: term %d of %s ended: %w", election.ErrNotLeader, l.rev, l.Identity(), context.Cause(l.term.Context()))
	}
	return nil
}

// release is the term's release hook: stop keeping the lease alive and
// revoke it, which deletes the key and lets the next candidate win.
func (l *Leadership) release(ctx context.Context) error {
	l.sess.Orphan()
	if _, err := l.e.client.Revoke(ctx, l.lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("election: release: revoke lease: %w", err)
	}
	l.log.V(1).Info("Released", "token", l.rev)
	return nil
}

// keep renews the lease every TTL/3 with single keepalive requests, each
// bounded by the current validity, and checks the key; it moves ValidUntil
// forward on success and ends the term on definite loss.
func (l *Leadership) keep() {
	defer l.e.wg.Done()
	e := l.e
	interval := e.ttl / 3
	retry := min(500*time.Millisecond, interval)
	next := interval
	for {
		t := e.clock.NewTimer(next)
		select {
		case <-l.term.Done():
			t.Stop()
			return
		case <-t.C():
		}
		start := e.clock.Now()
		slack := l.ValidUntil().Sub(start)
		ctx, cancel := context.WithDeadline(l.term.Context(), time.Now().Add(slack))
		validUntil, _, err := e.confirm(ctx, l.key, l.rev, l.lease, start)
		cancel()
		if !l.term.Ended() {
			e.report.Renewed(l.term.Token(), e.clock.Since(start), slack, err)
		}
		switch {
		case err == nil:
			l.mu.Lock()
			l.validUntil = validUntil
			l.mu.Unlock()
			select {
			case l.renewed <- struct{}{}:
			default:
			}
			next = interval
		case errors.Is(err, election.ErrLeadershipLost):
			l.term.Lose(err)
			return
		default:
			l.log.V(1).Info("Renewing the term failed; retrying", "error", err)
			next = retry
		}
	}
}

// monitor ends the term when the session dies, the key is deleted, or the
// validity runs out, and cleans up after the term ended.
func (l *Leadership) monitor() {
	defer l.e.wg.Done()
	e := l.e
	// clientv3's Watch blocks until the server has accepted the watch, for
	// as long as a partition lasts: every watch is started on a goroutine
	// of its own (tracked by watches, each ending with the term context)
	// so that this loop keeps judging the term's validity meanwhile.
	var watches sync.WaitGroup
	defer watches.Wait()
	// From the revision after the confirmation: the key existed then, and
	// a watch from a newer revision than etcd's current one is notified at
	// once rather than by etcd's 100ms catch-up loop.
	var wch clientv3.WatchChan
	started, cancel := l.watchAsync(&watches, l.seen+1)
	defer func() { cancel() }()
	expiry := e.clock.NewTimer(l.ValidUntil().Sub(e.clock.Now()))
	defer func() { expiry.Stop() }()
	// The watch ends on every etcd leader change (WithRequireLeader), on
	// a network error, or when the server cancels it: it is re-established,
	// after checking the key, every rewatchInterval until it is back.
	var rewatch clock.Timer
	var rewatchC <-chan time.Time
	defer func() {
		if rewatch != nil {
			rewatch.Stop()
		}
	}()
	watchLost := func(reason string, err error) {
		l.log.V(1).Info("Watching the term's key ended; re-establishing it", "reason", reason, "error", err)
		cancel()
		wch = nil
		rewatch = e.clock.NewTimer(0)
		rewatchC = rewatch.C()
	}
	for !l.term.Ended() {
		select {
		case <-l.term.Done():
		case <-l.sess.Done():
			l.term.Lose(errors.New("the etcd session ended"))
		case wch = <-started:
			started = nil
		case <-rewatchC:
			rewatchC = nil
			rev, err := l.checkKey()
			switch {
			case errors.Is(err, errTermKeyDeleted):
				l.term.Lose(errTermKeyDeleted)
			case err != nil:
				l.log.V(1).Info("Re-establishing the watch on the term's key failed; retrying", "error", err)
				rewatch = e.clock.NewTimer(rewatchInterval)
				rewatchC = rewatch.C()
			default:
				started, cancel = l.watchAsync(&watches, rev+1)
			}
		case wr, ok := <-wch:
			switch {
			case !ok:
				watchLost("closed", nil)
			case wr.Err() != nil || wr.Canceled:
				watchLost("error", wr.Err())
			default:
				for _, ev := range wr.Events {
					if ev.Type == mvccpb.DELETE {
						l.term.Lose(errTermKeyDeleted)
					}
				}
			}
		case <-l.renewed:
			expiry.Stop()
			expiry = e.clock.NewTimer(l.ValidUntil().Sub(e.clock.Now()))
		case <-expiry.C():
			if !e.clock.Now().Before(l.ValidUntil()) {
				l.term.Lose(fmt.Errorf("lease not renewed for %v (TTL %v less margin)", e.ttl-e.margin, e.ttl))
			} else {
				expiry = e.clock.NewTimer(l.ValidUntil().Sub(e.clock.Now()))
			}
		}
	}
	cancel()
	cause := context.Cause(l.term.Context())
	l.log.V(1).Info("Term ended", "token", l.rev, "cause", cause)
	e.report.Ended(l.term.Token(), cause)
	if errors.Is(cause, election.ErrResigned) || errors.Is(cause, election.ErrClosed) {
		return // the holder's Resign releases it, after Close as well
	}
	// Lost: stop the keepalives and revoke, so that a lease still alive on
	// the server (the term ended locally first) does not hold the
	// election until its TTL.
	l.sess.Orphan()
	e.revoke(l.log, l.lease)
}

// watchAsync starts watching the term's key for deletions from rev, on a
// goroutine tracked by wg, and returns a channel that receives the watch
// channel once clientv3's Watch returned, and the watch's cancel. The
// goroutine ends at the latest when the term context ends.
func (l *Leadership) watchAsync(wg *sync.WaitGroup, rev int64) (<-chan clientv3.WatchChan, context.CancelFunc) {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(l.term.Context()))
	ch := make(chan clientv3.WatchChan, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		ch <- l.e.client.Watch(ctx, l.key, clientv3.WithRev(rev), clientv3.WithFilterPut())
	}()
	return ch, cancel
}

// rewatchInterval paces attempts to re-establish a term's watch.
const rewatchInterval = 500 * time.Millisecond

// errTermKeyDeleted is the reason of a term lost because its key went.
var errTermKeyDeleted = errors.New("the term's key was deleted")

// checkKey checks, within the term's validity, that the term's key still
// exists with the term's create revision, and returns the revision of the
// check. It returns errTermKeyDeleted if the key is gone.
func (l *Leadership) checkKey() (int64, error) {
	e := l.e
	ctx, cancel := context.WithDeadline(l.term.Context(), time.Now().Add(max(l.ValidUntil().Sub(e.clock.Now()), 0)))
	defer cancel()
	resp, err := e.client.Get(clientv3.WithRequireLeader(ctx), l.key, clientv3.WithKeysOnly())
	if err != nil {
		return 0, err
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != l.rev {
		return 0, errTermKeyDeleted
	}
	return resp.Header.Revision, nil
}

// guardedTxn is a clientv3.Txn whose If always includes the guard.
type guardedTxn struct {
	l   *Leadership
	txn clientv3.Txn
	cif bool
}

func (g *guardedTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	g.cif = true
	g.txn = g.txn.If(append([]clientv3.Cmp{g.l.Guard()}, cs...)...)
	return g
}

func (g *guardedTxn) ensureIf() {
	if !g.cif {
		g.If()
	}
}

func (g *guardedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	g.ensureIf()
	g.txn = g.txn.Then(ops...)
	return g
}

func (g *guardedTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	g.ensureIf()
	g.txn = g.txn.Else(ops...)
	return g
}

func (g *guardedTxn) Commit() (*clientv3.TxnResponse, error) {
	if err := g.l.notLeader(); err != nil {
		return nil, err
	}
	g.ensureIf()
	return g.txn.Commit()
}

// validateIdentity checks an identity before it is written to etcd.
func validateIdentity(id string) error {
	switch {
	case id == "":
		return errors.New("empty")
	case len(id) > maxIdentityLen:
		return fmt.Errorf("%d bytes, more than %d", len(id), maxIdentityLen)
	case !utf8.ValidString(id):
		return errors.New("not valid UTF-8")
	case strings.HasPrefix(id, "invalid:"):
		return errors.New(`starts with "invalid:", which marks values that are not identities`)
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return fmt.Errorf("control character %U", r)
		}
	}
	return nil
}

// decodeIdentity turns a leader key's value, written by any candidate on
// the prefix, into an identity. A valid identity is returned as is; any
// other value (empty, too long, not UTF-8, with control characters) is
// returned quoted and truncated after an "invalid:" prefix, so that it is
// never empty (empty means no leader) and never equal to a valid identity.
func decodeIdentity(b []byte) string {
	if validateIdentity(string(b)) == nil {
		return string(b)
	}
	const show = 64
	if len(b) > show {
		b = b[:show]
	}
	return "invalid:" + strconv.QuoteToASCII(string(b))
}

// Context implements election.Leadership: it ends the moment the term
// ends; context.Cause tells why (election.ErrLeadershipLost,
// election.ErrResigned or election.ErrClosed).
func (l *Leadership) Context() context.Context { return l.term.Context() }

// Token implements election.Leadership: the term's fencing token, the
// revision at which the candidate's key was created.
func (l *Leadership) Token() election.Token { return l.term.Token() }

// Identity implements election.Leadership.
func (l *Leadership) Identity() string { return l.term.Identity() }

// Resign implements election.Leadership: it ends the term context, then
// revokes the term's lease so that a successor takes over at once.
func (l *Leadership) Resign(ctx context.Context) error { return l.term.Resign(ctx) }

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

// ValidNow reports whether the term may act at this instant: its context
// is live and the elector's clock is before ValidUntil. The Kubernetes
// write gate of package election/lease asks it.
func (l *Leadership) ValidNow() bool {
	return !l.term.Ended() && l.e.clock.Now().Before(l.ValidUntil())
}

var _ term.Validator = (*Leadership)(nil)
