package kubefake

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
)

// change is one write, as a watch delivers it.
type change struct {
	gvr  schema.GroupVersionResource
	ns   string
	name string
	rv   uint64
	at   time.Time // when it was written, on Config.Clock
	ev   watch.Event
	prev runtime.Object // the object before the write; nil for a creation
}

// record keeps a change for later watches and for the watch cache, which
// hands it to the open watches when it applies it. The caller holds s.mu,
// and hands over obj and prev, its own copies: they are kept as they are,
// and nothing changes them afterwards (every reader of the history copies
// what it hands out).
func (s *Server) record(gvr schema.GroupVersionResource, ns, typ string, obj, prev runtime.Object) {
	c := change{gvr: gvr, ns: ns, rv: s.rv, at: s.clock.Now(), ev: watch.Event{Type: watch.EventType(typ), Object: obj}, prev: prev}
	if m, err := meta.Accessor(obj); err == nil {
		c.name = m.GetName()
	}
	s.history = append(s.history, c)
	s.trim()
	s.pending[gvr] = append(s.pending[gvr], c)
	s.follow(gvr)
}

// trim drops from the history the changes past Config.WatchHistory in
// number and those older than Config.WatchWindow on the clock, and moves
// the compaction point past them. The caller holds s.mu.
func (s *Server) trim() {
	n := max(len(s.history)-s.keep, 0)
	if w := s.cfg.WatchWindow; w > 0 {
		oldest := s.clock.Now().Add(-w)
		for n < len(s.history) && s.history[n].at.Before(oldest) {
			n++
		}
	}
	if n > 0 {
		s.compact = max(s.compact, s.history[n-1].rv)
		// Dropped from the front, not copied: append moves the rest
		// when it next grows the array, so a write costs no copy of the
		// whole history once it is full.
		clear(s.history[:n])
		s.history = s.history[n:]
	}
}

// watch serves a watch of one client from the watch cache: from the
// requested resourceVersion, or from where the cache is when none is
// given (the fake has no initial-events list; a client lists first, as
// informers do).
func (c *Client) watch(action k8stesting.Action) (bool, watch.Interface, error) {
	a, ok := action.(k8stesting.WatchActionImpl)
	if !ok {
		return false, nil, nil
	}
	s := c.srv
	c.requests.add(action)
	s.delay()
	if err := c.refused(action); err != nil {
		return true, nil, err
	}
	if f, err := s.fault(action); f != nil {
		return true, nil, err
	}
	r := a.GetWatchRestrictions()
	sel, err := fieldSelector(a.GetResource().GroupResource(), r.Fields)
	if err != nil {
		return true, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.cut {
		return true, nil, refused(action)
	}
	cached := s.cacheRV(a.GetResource())
	from := cached
	if rv := r.ResourceVersion; rv != "" && rv != "0" {
		n, err := strconv.ParseUint(rv, 10, 64)
		if err != nil {
			return true, nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q", rv))
		}
		s.trim()
		if n < s.compact {
			// The apiserver's watch cache opens the watch and sends the
			// 410 as its one event; Watch itself succeeds.
			return true, expired(fmt.Sprintf("too old resource version: %d (%d)", n, s.compact)), nil
		}
		from = n
	}
	w := &watcher{
		srv:    s,
		client: c,
		from:   from,
		gvr:    a.GetResource(),
		ns:     a.GetNamespace(),
		labels: r.Labels,
		fields: sel,
		out:    make(chan watch.Event),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	for _, ch := range s.history {
		if ch.rv <= cached {
			w.offer(ch)
		}
	}
	s.watchers = append(s.watchers, w)
	var expire <-chan time.Time
	if d := s.cfg.WatchLifetime; d > 0 {
		w.timer = s.timer.NewTimer(d)
		expire = w.timer.C()
	}
	go w.run(expire)
	return true, w, nil
}

// EndWatches ends every open watch, as an apiserver restart does: each
// result channel is closed, and clients must watch again from the last
// resourceVersion they saw.
func (s *Server) EndWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range slices.Clone(s.watchers) { // end removes w
		w.end()
	}
}

// expired is a watch whose one event is a 410 Gone (reason Expired),
// as the apiserver's watch cache answers a watch from a resourceVersion
// it no longer holds; the result channel is closed after it.
func expired(msg string) watch.Interface {
	st := apierrors.NewResourceExpired(msg).ErrStatus
	ch := make(chan watch.Event, 1)
	ch <- watch.Event{Type: watch.Error, Object: &st}
	close(ch)
	return errWatcher(ch)
}

// errWatcher is a watch that was over before it began.
type errWatcher <-chan watch.Event

func (w errWatcher) ResultChan() <-chan watch.Event { return w }
func (errWatcher) Stop()                            {}

// watcher is one open watch. Its queue has no bound, so a slow reader
// never blocks a writer (client-go's fake watcher panics at 100 unread
// events instead).
type watcher struct {
	srv    *Server
	client *Client
	from   uint64 // changes at or before it are not delivered
	timer  clock.Timer
	gvr    schema.GroupVersionResource
	ns     string
	labels labels.Selector
	fields fields.Selector

	mu    sync.Mutex
	queue []watch.Event

	out      chan watch.Event
	wake     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

var _ watch.Interface = (*watcher)(nil)

// offer queues c if the watch selects it. The caller holds srv.mu.
func (w *watcher) offer(c change) {
	if c.rv <= w.from || c.gvr != w.gvr || (w.ns != "" && c.ns != w.ns) {
		return
	}
	ev, ok := w.event(c)
	if !ok {
		return
	}
	w.mu.Lock()
	w.queue = append(w.queue, ev)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// event is c as this watch sees it, as the apiserver's watch cache
// judges it against the selectors: an object that comes to match them is
// ADDED, one that stops matching is DELETED (its previous state at the
// change's resourceVersion), and a change on either side of them only is
// not sent.
func (w *watcher) event(c change) (watch.Event, bool) {
	cur := c.ev.Type != watch.Deleted && w.selects(c.ev.Object)
	var old bool
	switch {
	case c.prev != nil:
		old = w.selects(c.prev)
	case c.ev.Type == watch.Deleted:
		old = w.selects(c.ev.Object)
	}
	switch {
	case cur && old:
		return watch.Event{Type: watch.Modified, Object: c.ev.Object.DeepCopyObject()}, true
	case cur:
		return watch.Event{Type: watch.Added, Object: c.ev.Object.DeepCopyObject()}, true
	case old && c.ev.Type == watch.Deleted:
		return watch.Event{Type: watch.Deleted, Object: c.ev.Object.DeepCopyObject()}, true
	case old:
		obj := c.prev.DeepCopyObject()
		if m, err := meta.Accessor(obj); err == nil {
			m.SetResourceVersion(strconv.FormatUint(c.rv, 10))
		}
		return watch.Event{Type: watch.Deleted, Object: obj}, true
	}
	return watch.Event{}, false
}

func (w *watcher) selects(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return true
	}
	if w.labels != nil && !w.labels.Matches(labels.Set(m.GetLabels())) {
		return false
	}
	if w.fields != nil && !w.fields.Empty() && !w.fields.Matches(fieldSet(obj)) {
		return false
	}
	return true
}

// run delivers the queued events in order until the watch ends or
// expire fires.
func (w *watcher) run(expire <-chan time.Time) {
	defer close(w.out)
	for {
		w.mu.Lock()
		q := w.queue
		w.queue = nil
		w.mu.Unlock()
		if d := time.Duration(w.client.watchDelay.Load()); d > 0 && len(q) > 0 {
			t := w.srv.timer.NewTimer(d)
			select {
			case <-t.C():
			case <-w.done:
				t.Stop()
				return
			case <-expire:
				t.Stop()
				w.Stop()
				return
			}
			w.mu.Lock()
			q = append(q, w.queue...) // what came meanwhile goes with it
			w.queue = nil
			w.mu.Unlock()
		}
		for _, ev := range q {
			select {
			case w.out <- ev:
			case <-w.done:
				return
			case <-expire:
				w.Stop()
				return
			}
		}
		select {
		case <-w.wake:
		case <-w.done:
			return
		case <-expire:
			w.Stop()
			return
		}
	}
}

// ResultChan returns the events; it is closed after Stop.
func (w *watcher) ResultChan() <-chan watch.Event { return w.out }

// Stop ends the watch.
func (w *watcher) Stop() {
	w.srv.mu.Lock()
	defer w.srv.mu.Unlock()
	w.end()
}

// end ends the watch from the server's side. The caller holds srv.mu.
func (w *watcher) end() {
	w.stopOnce.Do(func() {
		w.srv.watchers = slices.DeleteFunc(w.srv.watchers, func(o *watcher) bool { return o == w })
		if w.timer != nil {
			w.timer.Stop()
		}
		close(w.done)
	})
}
