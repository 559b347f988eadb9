package kubestore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// The reaper's liveness watch: while a Store holds the reaper Lease it
// lists and watches the liveness objects (the heartbeat Leases by label,
// or every Lease in the node Lease namespace), judges them as a Lease
// elector judges a Lease (dead once its resourceVersion has not changed
// for its TTL plus the margin since this store first saw it), and deletes
// the records they no longer keep alive, each conditioned on the object
// and resourceVersion judged.

// livenessSource is what the liveness watch lists and watches.
func (s *Store) livenessSource() (ns string, leases coordclient.LeaseInterface, opts metav1.ListOptions) {
	if s.node != nil {
		return s.node.ns, s.node.leases, metav1.ListOptions{}
	}
	return s.ns, s.leases, metav1.ListOptions{LabelSelector: LabelGate + "=" + s.gate + "," + LabelRole + "=" + RoleHeartbeat}
}

// watchLiveness lists and watches the liveness objects until ctx ends,
// judging the records every reapInterval of the store's clock. A failed
// listing or watch is tried again after a pause that doubles while they
// keep failing.
func (s *Store) watchLiveness(ctx context.Context) {
	log := logr.FromContextOrDiscard(ctx)
	ns, leases, opts := s.livenessSource()
	s.mu.Lock()
	s.orphans = map[types.UID]time.Time{}
	s.mu.Unlock()
	tick := s.clock.NewTicker(reapInterval)
	defer tick.Stop()
	pause := watchPauseBase
	for {
		started := s.clock.Now()
		rev, err := s.listLiveness(ctx, ns, leases, opts)
		if err == nil {
			s.judge(ctx)
			err = s.watchLoop(ctx, s.rand.liveness, ns, leases, rev, opts, tick.C(), func(ctx context.Context, _ int64) { s.judge(ctx) }, func(ev watch.EventType, l *coordinationv1.Lease, r int64) (bool, error) {
				s.sawLiveness(ev, l, r)
				return false, nil
			})
		}
		if ctx.Err() != nil {
			return
		}
		if s.clock.Since(started) > watchPauseMax {
			pause = watchPauseBase
		}
		if !errors.Is(err, ErrWatchExpired) {
			log.Info("Watching the records' liveness failed; listing again", "err", fmt.Sprint(err))
		}
		t := s.clock.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		pause = min(2*pause, watchPauseMax)
	}
}

// listLiveness lists the liveness objects (resourceVersion unset, in
// pages) into s.live and returns the listing's revision.
func (s *Store) listLiveness(ctx context.Context, ns string, leases coordclient.LeaseInterface, opts metav1.ListOptions) (int64, error) {
	opts.Limit = s.page
	var items []coordinationv1.Lease
	var rev int64
	for {
		list, err := leases.List(ctx, opts)
		if err != nil {
			return 0, wrapIn(ns, "list", "Leases in "+ns, err)
		}
		if rev == 0 {
			if rev, err = revision("the Lease listing", list.ResourceVersion); err != nil {
				return 0, err
			}
		}
		items = append(items, list.Items...)
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	now := s.clock.Now()
	present := make(map[string]bool, len(items))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range items {
		l := &items[i]
		rv, err := revision(l.Name, l.ResourceVersion)
		if err != nil {
			continue
		}
		present[l.Name] = true
		s.live.observe(l.Name, l.UID, []byte{}, "", rv, leaseTTL(l), now)
	}
	s.live.listed(present, rev, now)
	return rev, nil
}

// sawLiveness applies a watch event of a liveness object.
func (s *Store) sawLiveness(ev watch.EventType, l *coordinationv1.Lease, rev int64) {
	value := []byte{}
	if ev == watch.Deleted {
		value = nil
	}
	s.mu.Lock()
	s.live.observe(l.Name, l.UID, value, "", rev, leaseTTL(l), s.clock.Now())
	s.mu.Unlock()
}

// nodeLeaseStill reads the node Lease a record judged dead names (GET,
// linearizable) and reports whether it is still the object and
// resourceVersion judged, or gone: the reaper's view comes from a watch,
// which may lag, and the store does not write node Leases, so no delete
// can be conditioned on them. A renewal the read shows keeps the record;
// one applied after the read was learned of by the node after its gate's
// deadline, counted from the renewal judged, had passed.
func (s *Store) nodeLeaseStill(ctx context.Context, j reapJob) bool {
	l, err := s.node.leases.Get(ctx, j.node, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && !apiMissing(err):
		return true
	case err != nil:
		logr.FromContextOrDiscard(ctx).Info("Could not read a node Lease judged dead", "lease", s.nodeRef(j.node), "err", err.Error())
		return false
	}
	return l.UID != j.hbUID || l.ResourceVersion == strconv.FormatInt(j.hbRV, 10)
}

// livenessGone reads (GET, linearizable) the liveness object an orphan
// candidate names and reports whether it is gone for good: absent, or
// another object under its name. The reaper's view alone is not enough: a
// liveness watch that lags, or a listing that has not caught up after a
// restart, has simply not seen a heartbeat that is being renewed. An
// object with that UID cannot come back, so a record naming one gone is
// an orphan from then on; one still there starts the orphan's clock
// again.
func (s *Store) livenessGone(ctx context.Context, j reapJob) bool {
	ns, name, uid, ok := parseRef(j.ref)
	if !ok {
		return true // names nothing: an orphan from birth
	}
	_, leases, _ := s.livenessSource()
	if ns0, _, _ := s.livenessSource(); ns != ns0 {
		return true // names no object of this gate's liveness source
	}
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && !apiMissing(err):
		return true
	case err != nil:
		logr.FromContextOrDiscard(ctx).Info("Could not read the liveness object of a record thought orphaned", "liveness", j.ref, "err", err.Error())
		s.judgeOrphanAgain(j)
		return false
	case l.UID != uid:
		return true
	}
	s.mu.Lock()
	delete(s.orphans, j.record)
	s.mu.Unlock()
	return false
}

// reapJob is one deletion the reaper judged due: a dead liveness object
// (hb, per-record mode) and the record naming it (id), or an orphaned
// record (orphan), or a dead heartbeat no record names (id empty).
type reapJob struct {
	id     string
	record types.UID
	recRV  int64
	hb     string // the heartbeat to delete first; "" for none
	hbUID  types.UID
	hbRV   int64
	node   string // records on node Leases: the node Lease judged dead
	orphan bool
	ref    string // an orphan's liveness object, as the record names it
}

// judge finds the records whose liveness object is dead, or which the
// liveness watch has not seen alive for their TTL plus the margin since
// the reaper first noticed, and deletes them (see reap).
func (s *Store) judge(ctx context.Context) {
	ns, _, _ := s.livenessSource()
	now := s.clock.Now()
	var jobs []reapJob
	s.mu.Lock()
	named := map[string]bool{}
	records := map[types.UID]bool{}
	for id, r := range s.seen.recs {
		if r.deleted {
			continue
		}
		records[r.uid] = true
		if s.reaped[r.uid] {
			continue // deleted here; the watch has not shown it yet
		}
		rns, name, uid, ok := parseRef(r.ref)
		var e *seenRecord
		if ok && rns == ns {
			e = s.live.recs[name]
			named[r.ref] = true
		}
		if e != nil && !e.deleted && e.uid == uid {
			delete(s.orphans, r.uid)
			if e.dead(now) {
				j := reapJob{id: id, record: r.uid, recRV: r.rv}
				j.hbUID, j.hbRV = e.uid, e.rv
				if s.node == nil {
					j.hb = name
				} else {
					j.node = name
				}
				jobs = append(jobs, j)
			}
			continue
		}
		since, noticed := s.orphans[r.uid]
		if !noticed {
			s.orphans[r.uid] = now
			continue
		}
		if now.Sub(since) >= r.ttl+recordMargin(r.ttl) {
			jobs = append(jobs, reapJob{id: id, record: r.uid, recRV: r.rv, orphan: true, ref: r.ref})
		}
	}
	for uid := range s.orphans {
		if !records[uid] {
			delete(s.orphans, uid)
		}
	}
	for uid := range s.reaped {
		if !records[uid] {
			delete(s.reaped, uid)
		}
	}
	if s.node == nil {
		for name, e := range s.live.recs {
			if e.dead(now) && !named[ns+"/"+name+"/"+string(e.uid)] {
				jobs = append(jobs, reapJob{hb: name, hbUID: e.uid, hbRV: e.rv})
			}
		}
	}
	s.mu.Unlock()
	for _, j := range jobs {
		if ctx.Err() != nil {
			return
		}
		s.reap(ctx, j)
	}
}

// reap carries out one job: the heartbeat first, conditioned on the UID
// and resourceVersion judged (a renewal since refuses it, and the record
// stays), then the record, conditioned likewise.
func (s *Store) reap(ctx context.Context, j reapJob) {
	log := logr.FromContextOrDiscard(ctx)
	if j.hb != "" {
		err := s.deleteCond(ctx, j.hb, j.hbUID, strconv.FormatInt(j.hbRV, 10))
		if err != nil {
			if errors.Is(err, errRecordAlive) {
				// Renewed since it was judged, though this store's watch
				// has not shown it (a watch that keeps ending): judge it
				// again from now, a TTL and the margin later, instead of
				// trying the same refused delete every reap interval
				// (TestEveryLoopOfALeadingNodeKeepsItsBudget).
				s.mu.Lock()
				if e := s.live.recs[j.hb]; e != nil && e.uid == j.hbUID && e.rv == j.hbRV {
					e.at = s.clock.Now()
				}
				s.mu.Unlock()
			} else {
				log.Info("Could not delete a dead heartbeat", "lease", s.ref(j.hb), "err", err.Error())
			}
			return
		}
		s.mu.Lock()
		if e := s.live.recs[j.hb]; e != nil && e.uid == j.hbUID && e.rv == j.hbRV {
			e.deleted = true
		}
		s.mu.Unlock()
		log.Info("Deleted a dead heartbeat", "lease", s.ref(j.hb), "resourceVersion", j.hbRV)
	}
	if j.id == "" {
		return
	}
	if s.node != nil && !j.orphan && !s.nodeLeaseStill(ctx, j) {
		return
	}
	if j.orphan && !s.livenessGone(ctx, j) {
		return
	}
	name := s.gate + "-" + j.id
	if err := s.deleteCond(ctx, name, j.record, strconv.FormatInt(j.recRV, 10)); err != nil {
		log.Info("Could not delete a dead node record", "lease", s.ref(name), "err", err.Error())
		s.judgeOrphanAgain(j)
		return
	}
	s.mu.Lock()
	s.reaped[j.record] = true
	delete(s.orphans, j.record)
	s.mu.Unlock()
	if j.orphan {
		log.Info("Deleted an orphaned node record: its liveness object was not seen alive", "lease", s.ref(name), "resourceVersion", j.recRV)
	} else {
		log.Info("Deleted a dead node record", "lease", s.ref(name), "resourceVersion", j.recRV)
	}
}

// judgeOrphanAgain starts the clock of an orphan job that failed (its
// liveness object's read or its delete) again from now, as a refused
// heartbeat delete is judged again: the record is tried again its TTL and
// the margin later, not every reap interval.
func (s *Store) judgeOrphanAgain(j reapJob) {
	if !j.orphan {
		return
	}
	s.mu.Lock()
	s.orphans[j.record] = s.clock.Now()
	s.mu.Unlock()
}
