package kubestore_test

import (
	"context"
	"strconv"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// countingClient counts a client's Lease writes by namespace, and the
// watch events it receives by the watch's label selector and the role of
// the Lease each event is about.
type countingClient struct {
	kubernetes.Interface
	c *counts
}

type counts struct {
	mu      sync.Mutex
	writes  map[string]int            // by namespace
	events  map[string]map[string]int // by selector, then the Lease's role label ("" for none)
	watches map[string]int            // watches opened, by selector
	// since is the resourceVersion from which events count: an event
	// about an older version of its Lease is not counted.
	since int64
}

func newCountingClient(cs kubernetes.Interface) (*countingClient, *counts) {
	c := &counts{}
	c.reset()
	return &countingClient{Interface: cs, c: c}, c
}

func (c *counts) reset() { c.resetSince(0) }

// resetSince clears the counts, and from now on counts only the events
// about Lease versions newer than rv (a server's resourceVersion): a
// watch that delivers late the event of a write made before rv, which a
// loaded machine or a watch opened late does, adds nothing.
func (c *counts) resetSince(rv int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes, c.events, c.watches = map[string]int{}, map[string]map[string]int{}, map[string]int{}
	c.since = rv
}

func (c *counts) write(ns string) {
	c.mu.Lock()
	c.writes[ns]++
	c.mu.Unlock()
}

func (c *counts) writesIn(ns string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes[ns]
}

// snapshot returns the events received by selector and role, and the
// watches opened by selector.
func (c *counts) snapshot() (map[string]map[string]int, map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ev := map[string]map[string]int{}
	for sel, m := range c.events {
		ev[sel] = map[string]int{}
		for r, n := range m {
			ev[sel][r] = n
		}
	}
	w := map[string]int{}
	for sel, n := range c.watches {
		w[sel] = n
	}
	return ev, w
}

func (c *countingClient) CoordinationV1() coordclient.CoordinationV1Interface {
	return countingCoord{CoordinationV1Interface: c.Interface.CoordinationV1(), c: c.c}
}

type countingCoord struct {
	coordclient.CoordinationV1Interface
	c *counts
}

func (c countingCoord) Leases(ns string) coordclient.LeaseInterface {
	return countingLeases{LeaseInterface: c.CoordinationV1Interface.Leases(ns), ns: ns, c: c.c}
}

type countingLeases struct {
	coordclient.LeaseInterface
	ns string
	c  *counts
}

func (l countingLeases) Create(ctx context.Context, o *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	l.c.write(l.ns)
	return l.LeaseInterface.Create(ctx, o, opts)
}

func (l countingLeases) Update(ctx context.Context, o *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	l.c.write(l.ns)
	return l.LeaseInterface.Update(ctx, o, opts)
}

func (l countingLeases) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*coordinationv1.Lease, error) {
	l.c.write(l.ns)
	return l.LeaseInterface.Patch(ctx, name, pt, data, opts, sub...)
}

func (l countingLeases) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	l.c.write(l.ns)
	return l.LeaseInterface.Delete(ctx, name, opts)
}

func (l countingLeases) DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, lo metav1.ListOptions) error {
	l.c.write(l.ns)
	return l.LeaseInterface.DeleteCollection(ctx, opts, lo)
}

func (l countingLeases) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := l.LeaseInterface.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	sel := l.ns + " " + opts.LabelSelector + opts.FieldSelector
	l.c.mu.Lock()
	l.c.watches[sel]++
	l.c.mu.Unlock()
	return newCountingWatch(w, func(ev watch.Event) {
		o, ok := ev.Object.(*coordinationv1.Lease)
		if !ok || ev.Type == watch.Bookmark {
			return
		}
		role := o.Labels["reconkit.io/role"]
		rv, _ := strconv.ParseInt(o.ResourceVersion, 10, 64)
		l.c.mu.Lock()
		if rv != 0 && rv <= l.c.since {
			l.c.mu.Unlock()
			return
		}
		if l.c.events[sel] == nil {
			l.c.events[sel] = map[string]int{}
		}
		l.c.events[sel][role]++
		l.c.mu.Unlock()
	}), nil
}

// countingWatch passes a watch's events on, counting each.
type countingWatch struct {
	inner watch.Interface
	ch    chan watch.Event
	stop  chan struct{}
	once  sync.Once
}

func newCountingWatch(inner watch.Interface, count func(watch.Event)) *countingWatch {
	w := &countingWatch{inner: inner, ch: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(w.ch)
		for {
			select {
			case ev, ok := <-inner.ResultChan():
				if !ok {
					return
				}
				count(ev)
				select {
				case w.ch <- ev:
				case <-w.stop:
					return
				}
			case <-w.stop:
				return
			}
		}
	}()
	return w
}

func (w *countingWatch) ResultChan() <-chan watch.Event { return w.ch }

func (w *countingWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.inner.Stop()
	})
}
