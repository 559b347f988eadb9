package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/internal/jitter"
	"github.com/reconkit/reconkit/internal/term"
)

// Leadership is a term on etcd. Besides election.Leadership and election.Expiring it
// offers the comparison and transactions that make etcd itself refuse a
// write once the term has ended.
type Leadership struct {
	core  *term.Core
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

// Lease returns the etcd lease the candidate key is attached to.
func (l *Leadership) Lease() clientv3.LeaseID { return l.lease }

// ValidUntil implements election.Expiring: the start of the last successful lease
// renewal plus the TTL, less a margin (a tenth of the TTL, at least
// 500ms). The term ends then unless a renewal succeeded in between.
func (l *Leadership) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// Context implements election.Leadership: it ends the moment the term
// ends; context.Cause tells why (election.ErrLeadershipLost,
// election.ErrResigned or election.ErrClosed).
func (l *Leadership) Context() context.Context { return l.core.Context() }

// Token implements election.Leadership: the term's fencing token, the
// revision at which the candidate's key was created.
func (l *Leadership) Token() election.Token { return l.core.Token() }

// Identity implements election.Leadership.
func (l *Leadership) Identity() string { return l.core.Identity() }

// Resign implements election.Leadership: it ends the term context, then
// revokes the term's lease so that a successor takes over at once.
func (l *Leadership) Resign(ctx context.Context) error { return l.core.Resign(ctx) }

// ValidNow reports whether the term may act at this instant: its context
// is live and the elector's clock is before ValidUntil. The Kubernetes
// write gate of package election/lease asks it.
func (l *Leadership) ValidNow() bool {
	return !l.core.Ended() && l.e.clock.Now().Before(l.ValidUntil())
}

var _ term.Validator = (*Leadership)(nil)

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
	retry := renewRetry(interval, e.rand)
	next := interval
	failed := 0 // renewals failed in a row
	for {
		t := e.clock.NewTimer(next)
		select {
		case <-l.core.Done():
			t.Stop()
			return
		case <-t.C():
		}
		start := e.clock.Now()
		slack := l.ValidUntil().Sub(start)
		ctx, cancel := context.WithDeadline(l.core.Context(), time.Now().Add(slack))
		validUntil, _, err := e.confirm(ctx, l.key, l.rev, l.lease, start)
		cancel()
		if !l.core.Ended() {
			e.report.Renewed(l.core.Token(), e.clock.Since(start), slack, err)
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
			next, failed = interval, 0
		case errors.Is(err, election.ErrLeadershipLost):
			l.core.Lose(err)
			return
		default:
			l.log.V(1).Info("Renewing the term failed; retrying", "error", err)
			failed++
			next = retry.Pause(failed, l.ValidUntil().Sub(e.clock.Now()))
		}
	}
}

// renewRetry paces the retries of a failed renewal, when interval is the
// renewal interval (TTL/3): from 500ms (or interval, if shorter) growing
// by half each time up to interval, each pause up to a fifth longer at
// random, so that terms whose renewals one outage failed together retry
// apart: five or six tries before ValidUntil at the default TTL (the
// failed renewal included) rather than twelve, each a keepalive and a
// read. A pause that would start a try later than 250ms (half the first
// pause) before ValidUntil is brought forward to start it before then,
// never below the first pause nor a quarter of the pause it replaces; when
// none fits the term ends first, at ValidUntil.
func renewRetry(interval time.Duration, rand func() float64) backoff.Renewal {
	first := min(500*time.Millisecond, interval)
	return backoff.Renewal{
		Initial:      first,
		Multiplier:   1.5,
		Max:          interval,
		Jitter:       0.2,
		Reserve:      first / 2,
		MinShortened: 0.25,
		Rand:         rand,
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
	watchedAt := e.clock.Now() // when the current watch was asked for
	defer func() { cancel() }()
	expiry := e.clock.NewTimer(l.ValidUntil().Sub(e.clock.Now()))
	defer func() { expiry.Stop() }()
	// The watch ends on every etcd leader change (WithRequireLeader), on
	// a network error, or when the server cancels it: it is re-established,
	// after checking the key. A watch that lasted at least the longest
	// pause is re-established at once; after a shorter one, and after a
	// failed check, the pause grows from rewatchInterval by half each
	// time, spread by up to a fifth, to at most the session TTL. So a
	// server or proxy that ends every watch at once, or fails every read,
	// costs a read and a watch per TTL at most, not a spin; meanwhile each
	// renewal checks the key (every TTL/3), so the term still learns of
	// a deleted key within a renewal.
	var rewatch clock.Timer
	var rewatchC <-chan time.Time
	defer func() {
		if rewatch != nil {
			rewatch.Stop()
		}
	}()
	failures := 0 // short watches and failed checks in a row
	armRewatch := func(wait time.Duration) {
		rewatch = e.clock.NewTimer(wait)
		rewatchC = rewatch.C()
	}
	watchLost := func(reason string, err error) {
		l.log.V(1).Info("Watching the candidate key ended; re-establishing it", "reason", reason, "error", err)
		cancel()
		wch = nil
		if e.clock.Since(watchedAt) >= e.ttl {
			failures = 0
			armRewatch(0)
			return
		}
		failures++
		armRewatch(rewatchPause(failures, e.ttl, e.rand))
	}
	for !l.core.Ended() {
		select {
		case <-l.core.Done():
		case <-l.sess.Done():
			l.core.Lose(errors.New("the etcd session ended"))
		case wch = <-started:
			started = nil
		case <-rewatchC:
			rewatchC = nil
			rev, err := l.checkKey()
			switch {
			case errors.Is(err, errCandidateKeyDeleted):
				l.core.Lose(errCandidateKeyDeleted)
			case err != nil:
				l.log.V(1).Info("Re-establishing the watch on the candidate key failed; retrying", "error", err)
				failures++
				armRewatch(rewatchPause(failures, e.ttl, e.rand))
			default:
				started, cancel = l.watchAsync(&watches, rev+1)
				watchedAt = e.clock.Now()
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
						l.core.Lose(errCandidateKeyDeleted)
					}
				}
			}
		case <-l.renewed:
			expiry.Stop()
			expiry = e.clock.NewTimer(l.ValidUntil().Sub(e.clock.Now()))
		case <-expiry.C():
			if !e.clock.Now().Before(l.ValidUntil()) {
				l.core.Lose(fmt.Errorf("lease not renewed for %v (TTL %v less margin)", e.ttl-e.margin, e.ttl))
			} else {
				expiry = e.clock.NewTimer(l.ValidUntil().Sub(e.clock.Now()))
			}
		}
	}
	cancel()
	cause := context.Cause(l.core.Context())
	l.log.V(1).Info("Term ended", "token", l.rev, "cause", cause)
	e.report.Ended(l.core.Token(), cause)
	if errors.Is(cause, election.ErrResigned) || errors.Is(cause, election.ErrClosed) {
		return // the holder's Resign releases it, after Close as well
	}
	// Lost: stop the keepalives and revoke, so that a lease still alive on
	// the server (the term ended locally first) does not hold the
	// election until its TTL.
	l.sess.Orphan()
	e.revoke(l.log, l.lease)
}

// watchAsync starts watching the candidate key for deletions from rev, on a
// goroutine tracked by wg, and returns a channel that receives the watch
// channel once clientv3's Watch returned, and the watch's cancel. The
// goroutine ends at the latest when the term context ends.
func (l *Leadership) watchAsync(wg *sync.WaitGroup, rev int64) (<-chan clientv3.WatchChan, context.CancelFunc) {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(l.core.Context()))
	ch := make(chan clientv3.WatchChan, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		ch <- l.e.client.Watch(ctx, l.key, clientv3.WithRev(rev), clientv3.WithFilterPut())
	}()
	return ch, cancel
}

// rewatchInterval is the first pause before a term re-establishes a
// watch that ended early.
const rewatchInterval = 500 * time.Millisecond

// rewatchPause is the pause before the n-th attempt in a row to
// re-establish a term's watch: rewatchInterval, growing by half with each
// attempt up to limit, plus up to a fifth more at random, so that the
// terms of many elections on one etcd do not watch again in step.
func rewatchPause(n int, limit time.Duration, rand func() float64) time.Duration {
	d := rewatchInterval
	for i := 1; i < n && d < limit; i++ {
		d += d / 2
	}
	d = min(d, limit)
	return jitter.Up(rand, d, 0.2)
}

// errCandidateKeyDeleted is the reason of a term lost because its key went.
var errCandidateKeyDeleted = errors.New("the candidate key was deleted")

// checkKey checks, within the term's validity, that the candidate key still
// exists with the term's create revision, and returns the revision of the
// check. It returns errCandidateKeyDeleted if the key is gone.
func (l *Leadership) checkKey() (int64, error) {
	e := l.e
	ctx, cancel := context.WithDeadline(l.core.Context(), time.Now().Add(max(l.ValidUntil().Sub(e.clock.Now()), 0)))
	defer cancel()
	resp, err := e.client.Get(clientv3.WithRequireLeader(ctx), l.key, clientv3.WithKeysOnly())
	if err != nil {
		return 0, err
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != l.rev {
		return 0, errCandidateKeyDeleted
	}
	return resp.Header.Revision, nil
}
