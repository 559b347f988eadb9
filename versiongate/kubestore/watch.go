package kubestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/reconkit/reconkit/internal/jitter"
	"github.com/reconkit/reconkit/versiongate"
)

// Pauses before a watch that ended without delivering anything is opened
// again: watchPauseBase doubling up to watchPauseMax, on the store's clock,
// each up to half as long again at random (Config.Rand), so that the watches a server
// restart ended on every node are not opened again at one instant.
const (
	watchPauseBase = 100 * time.Millisecond
	watchPauseMax  = 5 * time.Second
)

// reapInterval is how often the reaper judges the records' liveness.
const reapInterval = time.Second

// ErrWatchExpired is wrapped by WatchRecords and WatchStatus when the
// server no longer has the history to watch from the revision asked (410
// Gone): the caller reads or lists again.
var ErrWatchExpired = errors.New("versiongate/kubestore: watch revision expired")

// ListRecords implements versiongate.Store with one LIST of the record
// Leases, resourceVersion unset: a linearizable read, never a cache. The
// revision is the listing's, and the records are exactly the listing's:
// one snapshot. Records are never renewed, so a listing shows membership
// only; deleting dead records is the reaper's (see WatchRecords). One of
// this store's own records missing from the listing is lost: its next
// KeepAlive reports ErrRecordLost.
func (s *Store) ListRecords(ctx context.Context) ([]versiongate.Record, int64, error) {
	recs, rev, _, err := s.listHeld(ctx)
	return recs, rev, err
}

// listHeld is ListRecords, also returning the IDs of the records it
// lists as held: seen deleted, kept while their heartbeats may still be
// renewed (see heldDeath). The checker of the store's histories must know
// them: they are listed after their deletion, which no other record is.
func (s *Store) listHeld(ctx context.Context) ([]versiongate.Record, int64, []string, error) {
	list, rev, err := s.listRecords(ctx)
	if err != nil {
		return nil, 0, nil, err
	}
	now := s.clock.Now()
	present := make(map[string]bool, len(list))
	leases := make(map[string]*coordinationv1.Lease, len(list))
	s.mu.Lock()
	for i := range list {
		l := &list[i].lease
		present[list[i].id] = true
		leases[list[i].id] = l
		s.seen.observe(list[i].id, list[i].uid, list[i].stored, l.Annotations[AnnotationHeartbeat], list[i].rv, leaseTTL(l), now)
	}
	s.seen.listed(present, rev, now)
	s.noteListing(leases, rev)
	for i := range list {
		// Published again, if the listing shows a version after the
		// held deletion: a listing answered before it, whose answer
		// came after the watch saw the deletion, keeps the hold.
		if h := s.held[list[i].id]; h != nil && list[i].rv > h.rev {
			delete(s.held, list[i].id)
		}
	}
	held := s.heldRecords(present)
	s.mu.Unlock()
	out := make([]versiongate.Record, 0, len(list)+len(held))
	for _, r := range list {
		out = append(out, s.record(r.id, &r.lease))
	}
	ids := make([]string, len(held))
	for i, r := range held {
		ids[i] = r.ID
	}
	return append(out, held...), rev, ids, nil
}

type listedRecord struct {
	id     string
	lease  coordinationv1.Lease
	uid    types.UID
	stored []byte // the value annotation as stored (storedValue)
	rv     int64
}

// listAttempts bounds the listings started again because a continue
// token expired (the server compacted the snapshot between two pages).
const listAttempts = 3

// listRecords reads every record Lease of the gate, linearizably, in
// pages of s.page: the first page, resourceVersion unset, is a consistent
// read at the newest revision, and the continue token keeps every later
// page at that revision, so the pages are one snapshot. A token that
// expired between pages (410) starts the listing again.
func (s *Store) listRecords(ctx context.Context) ([]listedRecord, int64, error) {
	for attempt := 1; ; attempt++ {
		out, rev, err := s.listPages(ctx)
		if err != nil && attempt < listAttempts && apierrors.IsResourceExpired(err) && ctx.Err() == nil {
			logr.FromContextOrDiscard(ctx).Info("Listing the node records again: the snapshot expired between pages", "attempt", attempt, "err", err.Error())
			continue
		}
		return out, rev, err
	}
}

func (s *Store) listPages(ctx context.Context) ([]listedRecord, int64, error) {
	// ResourceVersion unset: a consistent read (etcd's, or the watch
	// cache's after it caught up with etcd). "0" or an informer would
	// answer from a cache that may lag.
	opts := metav1.ListOptions{LabelSelector: s.recordSelector(), Limit: s.page}
	var out []listedRecord
	var rev int64
	for {
		list, err := s.leases.List(ctx, opts)
		if err != nil {
			return nil, 0, s.wrapSel("list", s.recordSelector(), err)
		}
		r, err := revision("the Lease listing", list.ResourceVersion)
		if err != nil {
			return nil, 0, err
		}
		if rev == 0 {
			rev = r
		} else if r != rev {
			return nil, 0, fmt.Errorf("versiongate/kubestore: a page of the Lease listing is at resourceVersion %d, its first page at %d: the server does not keep a paginated LIST at one snapshot", r, rev)
		}
		for _, l := range list.Items {
			rv, err := revision(s.ref(l.Name), l.ResourceVersion)
			if err != nil {
				return nil, 0, err
			}
			out = append(out, listedRecord{id: s.recordID(l.Name), lease: l, uid: l.UID, stored: storedValue(&l), rv: rv})
		}
		if list.Continue == "" {
			return out, rev, nil
		}
		opts.Continue = list.Continue
	}
}

// WatchRecords implements versiongate.Store: a watch of the record Leases
// from rev. Records are never renewed, so every event is a creation or a
// deletion, and each is reported. When the server ends the watch it is
// opened again from the last revision seen, after a pause that grows while
// watches deliver nothing; 410 Gone returns an error wrapping
// ErrWatchExpired. One of this store's own records seen deleted or
// replaced is lost: its next KeepAlive reports ErrRecordLost.
//
// The watch includes the gate's reaper Lease, whose events are no record
// and are not reported: while WatchRecords runs, this store takes part in
// holding it, and while it holds it, watches the records' liveness and
// deletes dead records (see the package doc). That goroutine stops, and
// is waited for, before WatchRecords returns.
func (s *Store) WatchRecords(ctx context.Context, rev int64, fn func([]versiongate.Record, int64)) error {
	ctx, cancel := context.WithCancel(ctx)
	r := newReaper(s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	tick := s.clock.NewTicker(reapInterval)
	defer tick.Stop()
	known := map[string]watchKnown{} // each record this watch saw, as it last saw it
	// A held deletion proven is reported at this watch's position, up to
	// which it has delivered every change: not at what the store's
	// listings cover, which a ListRecords beside this watch may have
	// carried past changes the watch has still to deliver.
	onTick := func(ctx context.Context, pos int64) {
		s.mu.Lock()
		// Every record change up to pos is applied (events of other
		// Leases and bookmarks move pos and change no record): a status
		// write conditioned on pos is validated against it.
		s.seen.covered = max(s.seen.covered, pos)
		n := len(s.held)
		s.mu.Unlock()
		if n == 0 {
			return
		}
		if dead := s.checkHeld(ctx, pos); len(dead) > 0 {
			fn(dead, pos)
		}
	}
	return s.watchLoop(ctx, s.rand.records, s.ns, s.leases, rev, metav1.ListOptions{LabelSelector: s.watchSelector()}, tick.C(), onTick,
		func(ev watch.EventType, l *coordinationv1.Lease, evRev int64) (bool, error) {
			if l.Labels[LabelRole] != RoleRecord {
				if l.Name == s.reaperName() {
					r.saw(ev, l, evRev)
				}
				return false, nil
			}
			id := s.recordID(l.Name)
			rec := s.record(id, l)
			stored := storedValue(l)
			deleted := ev == watch.Deleted
			// A deletion the heartbeat does not confirm is reported once
			// it does (see heldDeath).
			held := deleted && s.holdDeath(ctx, id, l, rec, evRev)
			if deleted {
				rec, stored = versiongate.Record{ID: id}, nil
			}
			s.mu.Lock()
			// Whether the gate must hear of it is this watch's question:
			// the store's tracker, which a ListRecords beside this watch
			// may have brought past this event, answers it only for a
			// record this watch has not shown yet.
			prev, shown := known[id]
			var changed bool
			switch {
			case deleted, ev == watch.Added:
				// Deleted (a watch delivers each deletion once), or
				// created after the watch's start.
				changed = true
			case shown:
				changed = prev.uid != l.UID || !bytes.Equal(prev.value, stored)
			default:
				changed = s.seen.changedAt(id, l.UID, stored, evRev)
			}
			if deleted {
				delete(known, id)
			} else {
				known[id] = watchKnown{uid: l.UID, value: stored}
			}
			s.seen.observe(id, l.UID, stored, l.Annotations[AnnotationHeartbeat], evRev, leaseTTL(l), s.clock.Now())
			s.seen.covered = max(s.seen.covered, evRev)
			s.noteRecord(id, l, deleted, evRev)
			if h := s.held[id]; h != nil && !deleted && evRev > h.rev {
				delete(s.held, id) // published again
			}
			s.mu.Unlock()
			if changed && !held {
				fn([]versiongate.Record{rec}, evRev)
			}
			return false, nil
		})
}

// watchKnown is a record as one WatchRecords call last saw it.
type watchKnown struct {
	uid   types.UID
	value []byte
}

// watchLoop watches the Leases opts selects from rev, calling handle for
// each event in order until handle returns true (watchLoop returns nil)
// or an error (returned), ctx ends, or the server answers 410 Gone. A
// watch the server ends is opened again from the last revision seen,
// after a pause on the store's clock that doubles while watches deliver
// nothing, drawn from rand. tick, if not nil, calls onTick from the loop
// with the revision up to which the watch has delivered every change.
func (s *Store) watchLoop(ctx context.Context, rand func() float64, ns string, leases coordclient.LeaseInterface, rev int64, opts metav1.ListOptions, tick <-chan time.Time, onTick func(context.Context, int64),
	handle func(watch.EventType, *coordinationv1.Lease, int64) (bool, error)) error {
	pause := watchPauseBase
	for {
		o := opts
		o.ResourceVersion = strconv.FormatInt(rev, 10)
		o.AllowWatchBookmarks = true
		w, err := leases.Watch(ctx, o)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return s.watchErr(ns, opts, err)
		}
		delivered, done, err := s.drain(ctx, w, &rev, tick, onTick, handle)
		w.Stop()
		if done || err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The server ended the watch (its timeout, a proxy's EOF): open it
		// again, pausing first so that one ending at once never spins.
		if delivered {
			pause = watchPauseBase
		}
		t := s.clock.NewTimer(jitter.Up(rand, pause, 0.5))
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C():
				waiting = false
			case <-tick:
				onTick(ctx, rev)
			}
		}
		pause = min(2*pause, watchPauseMax)
	}
}

// drain reads one watch until it closes; it advances *rev past every
// event and bookmark.
func (s *Store) drain(ctx context.Context, w watch.Interface, rev *int64, tick <-chan time.Time, onTick func(context.Context, int64),
	handle func(watch.EventType, *coordinationv1.Lease, int64) (bool, error)) (delivered, done bool, err error) {
	for {
		select {
		case <-ctx.Done():
			return delivered, true, ctx.Err()
		case <-tick:
			onTick(ctx, *rev)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return delivered, false, nil
			}
			switch ev.Type {
			case watch.Error:
				if ctx.Err() != nil {
					// client-go reports the end of ctx as a decoding error
					// event: the watch ended because ctx did.
					return delivered, true, ctx.Err()
				}
				err := apierrors.FromObject(ev.Object)
				if st, ok := ev.Object.(*metav1.Status); ok && (st.Code == http.StatusGone || st.Reason == metav1.StatusReasonExpired || st.Reason == metav1.StatusReasonGone) {
					return delivered, true, fmt.Errorf("%w: from %d: %w", ErrWatchExpired, *rev, err)
				}
				return delivered, true, fmt.Errorf("versiongate/kubestore: watch Leases: %w", err)
			case watch.Bookmark:
				if l, ok := ev.Object.(*coordinationv1.Lease); ok {
					if r, err := revision("a watch bookmark", l.ResourceVersion); err == nil && r > *rev {
						*rev = r
					}
				}
				continue
			}
			l, ok := ev.Object.(*coordinationv1.Lease)
			if !ok {
				continue
			}
			r, err := revision(s.ref(l.Name), l.ResourceVersion)
			if err != nil {
				return delivered, true, err
			}
			if r <= *rev {
				continue // replayed; already seen
			}
			*rev = r
			delivered = true
			stop, err := handle(ev.Type, l, r)
			if err != nil || stop {
				return delivered, true, err
			}
		}
	}
}

// watchErr wraps the failure to open a watch in namespace ns; 410 Gone
// wraps ErrWatchExpired.
func (s *Store) watchErr(ns string, opts metav1.ListOptions, err error) error {
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return fmt.Errorf("%w: %w", ErrWatchExpired, err)
	}
	sel := opts.LabelSelector
	if opts.FieldSelector != "" {
		sel = opts.FieldSelector
	}
	obj := fmt.Sprintf("Leases in %s", ns)
	if sel != "" {
		obj += fmt.Sprintf(" (selector %s)", sel)
	}
	return wrapIn(ns, "watch", obj, err)
}
