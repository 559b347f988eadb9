package kubefake

import (
	"fmt"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
)

// change is one write, as a watch delivers it.
type change struct {
	gvr schema.GroupVersionResource
	ns  string
	rv  uint64
	ev  watch.Event
}

// record keeps a change for later watches and hands it to the open ones.
// The caller holds s.mu.
func (s *server) record(gvr schema.GroupVersionResource, ns, typ string, obj runtime.Object) {
	c := change{gvr: gvr, ns: ns, rv: s.rv, ev: watch.Event{Type: watch.EventType(typ), Object: obj.DeepCopyObject()}}
	s.history = append(s.history, c)
	if over := len(s.history) - s.keep; over > 0 {
		s.compact = s.history[over-1].rv
		s.history = append(s.history[:0:0], s.history[over:]...)
	}
	for w := range s.watchers {
		w.offer(c)
	}
}

// watch serves a watch from the change history: from the requested
// resourceVersion, or from now when none is given (the fake has no
// initial-events list; a client lists first, as informers do).
func (s *server) watch(action k8stesting.Action) (bool, watch.Interface, error) {
	a, ok := action.(k8stesting.WatchActionImpl)
	if !ok {
		return false, nil, nil
	}
	r := a.GetWatchRestrictions()
	s.mu.Lock()
	defer s.mu.Unlock()
	from := s.rv
	if rv := r.ResourceVersion; rv != "" && rv != "0" {
		n, err := strconv.ParseUint(rv, 10, 64)
		if err != nil {
			return true, nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q", rv))
		}
		if n < s.compact {
			return true, nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", n, s.compact))
		}
		from = n
	}
	w := &watcher{
		srv:    s,
		gvr:    a.GetResource(),
		ns:     a.GetNamespace(),
		labels: r.Labels,
		fields: r.Fields,
		out:    make(chan watch.Event),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	for _, c := range s.history {
		if c.rv > from {
			w.offer(c)
		}
	}
	if s.watchers == nil {
		s.watchers = map[*watcher]struct{}{}
	}
	s.watchers[w] = struct{}{}
	go w.run()
	return true, w, nil
}

// watcher is one open watch. Its queue has no bound, so a slow reader
// never blocks a writer (client-go's fake watcher panics at 100 unread
// events instead).
type watcher struct {
	srv    *server
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
	if c.gvr != w.gvr || (w.ns != "" && c.ns != w.ns) || !w.selects(c.ev.Object) {
		return
	}
	w.mu.Lock()
	w.queue = append(w.queue, watch.Event{Type: c.ev.Type, Object: c.ev.Object.DeepCopyObject()})
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *watcher) selects(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return true
	}
	if w.labels != nil && !w.labels.Matches(labels.Set(m.GetLabels())) {
		return false
	}
	if w.fields != nil && !w.fields.Empty() {
		f := fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()}
		if !w.fields.Matches(f) {
			return false
		}
	}
	return true
}

func (w *watcher) run() {
	defer close(w.out)
	for {
		w.mu.Lock()
		q := w.queue
		w.queue = nil
		w.mu.Unlock()
		for _, ev := range q {
			select {
			case w.out <- ev:
			case <-w.done:
				return
			}
		}
		select {
		case <-w.wake:
		case <-w.done:
			return
		}
	}
}

// ResultChan returns the events; it is closed after Stop.
func (w *watcher) ResultChan() <-chan watch.Event { return w.out }

// Stop ends the watch.
func (w *watcher) Stop() {
	w.stopOnce.Do(func() {
		w.srv.mu.Lock()
		delete(w.srv.watchers, w)
		w.srv.mu.Unlock()
		close(w.done)
	})
}
