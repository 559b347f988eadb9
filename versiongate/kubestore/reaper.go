package kubestore

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// Pauses of the reaper loop after a request failed or was refused:
// reaperRetryBase doubling up to reaperRetryMax, on the store's clock.
const (
	reaperRetryBase = time.Second
	reaperRetryMax  = 10 * time.Second
)

// releaseTimeout bounds the release of the reaper Lease when its holder's
// WatchRecords returns.
const releaseTimeout = 2 * time.Second

// reaper is one WatchRecords' part in holding the gate's reaper Lease
// <gate>-reaper: it creates the Lease when absent, renews it while this
// store holds it, takes it over once it has not changed for its duration
// plus the margin on this store's clock (the judgement records get), and
// runs the liveness watch (Store.watchLiveness) while this store holds
// it. Its view of the Lease comes from the record watch (saw) and its own
// requests; it reads the Lease (GET, linearizable) only when it knows
// none. Two stores that both believe they hold it both reap: every delete
// is conditioned, so that costs requests, never a live record.
type reaper struct {
	s    *Store
	wake chan struct{}

	mu  sync.Mutex
	cur *coordinationv1.Lease // newest seen; nil: none known
	rv  int64                 // newest resourceVersion seen, of the Lease or its deletion
	at  time.Time             // when this store first saw rv
}

func newReaper(s *Store) *reaper { return &reaper{s: s, wake: make(chan struct{}, 1)} }

// saw applies an event of the reaper Lease from the record watch.
func (r *reaper) saw(ev watch.EventType, l *coordinationv1.Lease, rev int64) {
	r.mu.Lock()
	if rev > r.rv {
		r.cur, r.rv, r.at = l, rev, r.s.clock.Now()
		if ev == watch.Deleted {
			r.cur = nil
		}
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// set applies the Lease as a request of this store returned it; it
// reports whether this is now the Lease known.
func (r *reaper) set(l *coordinationv1.Lease) bool {
	rv, err := revision(r.s.ref(l.Name), l.ResourceVersion)
	if err != nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case rv > r.rv:
		r.cur, r.rv, r.at = l, rv, r.s.clock.Now()
	case rv == r.rv && r.cur == nil:
		r.cur = l
	}
	return r.cur != nil && r.rv == rv
}

// forget drops the Lease known, after a write conditioned on it was
// refused: the loop reads it again.
func (r *reaper) forget() {
	r.mu.Lock()
	r.cur = nil
	r.mu.Unlock()
}

// release deletes the reaper Lease if this store holds it, conditioned on
// the UID and resourceVersion it last saw, so that another store takes it
// at once instead of once it has aged out. It waits releaseTimeout at most:
// a store that cannot release it (cut off, or crashed) leaves the Lease to
// age out, which costs the gate's liveness only.
func (r *reaper) release(ctx context.Context) {
	r.mu.Lock()
	cur := r.cur
	r.mu.Unlock()
	if cur == nil || ptrString(cur.Spec.HolderIdentity) != r.s.identity {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	uid, rv := cur.UID, cur.ResourceVersion
	err := r.s.leases.Delete(rctx, cur.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	log := logr.FromContextOrDiscard(ctx)
	if err != nil && !apierrors.IsNotFound(err) {
		log.Info("Could not release the reaper Lease; it ages out", "lease", r.s.ref(cur.Name), "err", err.Error())
		return
	}
	log.V(1).Info("Released the reaper Lease", "lease", r.s.ref(cur.Name))
}

func (r *reaper) want(now time.Time) *coordinationv1.Lease {
	s := r.s
	return s.newLease(s.reaperName(), RoleReaper, s.identity, leaseSeconds(s.reaperDur), now)
}

// run holds, renews and takes over the reaper Lease until ctx ends,
// running the liveness watch while this store holds it.
func (r *reaper) run(ctx context.Context) {
	s := r.s
	log := logr.FromContextOrDiscard(ctx)
	name := s.reaperName()
	var stopLive func()
	startLive := func() {
		if stopLive != nil {
			return
		}
		lctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.watchLiveness(lctx)
		}()
		stopLive = func() { cancel(); <-done }
		log.Info("Holding the reaper Lease: watching the records' liveness", "lease", s.ref(name), "identity", s.identity)
	}
	endLive := func() {
		if stopLive != nil {
			stopLive()
			stopLive = nil
		}
	}
	defer r.release(ctx)
	defer endLive()
	retry := reaperRetryBase
	var renewed time.Time // when this store's last write of the Lease that held was sent
	// write sends next, an update of the Lease conditioned on the version
	// known, at now, and reports whether it landed. A refusal (409, or the
	// Lease gone) ends the liveness watch and makes the loop read the
	// Lease again.
	write := func(next *coordinationv1.Lease, now time.Time, what string) bool {
		l, err := s.leases.Update(ctx, next, metav1.UpdateOptions{})
		switch {
		case err == nil:
			r.set(l)
			renewed, retry = now, reaperRetryBase
			return true
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err) && !apiMissing(err):
			endLive()
			r.forget()
		case ctx.Err() == nil:
			log.Info("Could not "+what+" the reaper Lease", "lease", s.ref(name), "err", err.Error())
		}
		return false
	}
	for {
		r.mu.Lock()
		cur, at := r.cur, r.at
		r.mu.Unlock()
		now := s.clock.Now()
		var wait time.Duration
		failed := false
		switch {
		case cur == nil:
			endLive()
			l, err := s.leases.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) && !apiMissing(err) {
				l, err = s.leases.Create(ctx, r.want(now), metav1.CreateOptions{})
				if err == nil {
					renewed = now
					retry = reaperRetryBase
				}
			}
			if err == nil {
				if ferr := s.notOurs(l, RoleReaper); ferr != nil {
					// Never take over what is not the reaper Lease; retry
					// with the growing pause, in case it is renamed.
					log.Error(ferr, "Cannot hold the reaper Lease: this gate's dead records are not reaped")
					failed = true
					break
				}
			}
			if err != nil || !r.set(l) {
				if err != nil && ctx.Err() == nil && !apierrors.IsAlreadyExists(err) {
					log.Info("Could not read or create the reaper Lease", "lease", s.ref(name), "err", err.Error())
				}
				failed = true
			}
		case ptrString(cur.Spec.HolderIdentity) == s.identity:
			startLive()
			due := renewed.Add(s.reaperRenew)
			if renewed.IsZero() {
				due = now
			}
			if wait = due.Sub(now); wait > 0 {
				break
			}
			wait = 0
			next := cur.DeepCopy()
			mt := metav1.NewMicroTime(now)
			next.Spec.RenewTime = &mt
			failed = !write(next, now, "renew")
		default:
			endLive()
			d := leaseTTL(cur)
			if wait = at.Add(d + recordMargin(d)).Sub(now); wait > 0 {
				break
			}
			wait = 0
			next := r.want(now)
			next.ObjectMeta = *cur.ObjectMeta.DeepCopy()
			next.Spec.LeaseTransitions = cur.Spec.LeaseTransitions
			if next.Spec.LeaseTransitions == nil {
				next.Spec.LeaseTransitions = new(int32)
			}
			*next.Spec.LeaseTransitions++
			if failed = !write(next, now, "take over"); !failed {
				log.Info("Took over the reaper Lease", "lease", s.ref(name), "from", ptrString(cur.Spec.HolderIdentity), "unchangedFor", now.Sub(at))
			}
		}
		// The pause after a failure grows until a write of the Lease
		// succeeds: a read alone does not reset it, so that a read
		// followed by a refused write never repeats at once.
		if failed {
			wait = retry
			retry = min(2*retry, reaperRetryMax)
		} else if wait == 0 {
			continue
		}
		t := s.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-r.wake:
			t.Stop()
		}
	}
}
