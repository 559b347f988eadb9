package kubestore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// errCut is what every request of a cut hookClient returns.
var errCut = errors.New("test: connection to the apiserver cut")

// hookClient is a client whose Lease requests pass through hooks, for
// fault and interleaving injection: the same wrapper works over kubefake
// and over a real apiserver's client.
type hookClient struct {
	kubernetes.Interface
	h *hooks
}

// hooks are called before (or instead of) the Lease requests; each may be
// nil. A hook that returns an error fails the request with it.
type hooks struct {
	cut atomic.Bool

	mu           sync.Mutex
	beforeCreate func(l *coordinationv1.Lease) error
	beforeGet    func(name string) error
	afterGet     func(name string, l *coordinationv1.Lease)
	beforeUpdate func(l *coordinationv1.Lease) error
	beforeDelete func(name string) error
	afterDelete  func(name string, err error)
	beforeList   func(opts *metav1.ListOptions) error
	// list, if set, answers a LIST instead of the server when it returns
	// true (a cache, for example).
	list func(opts metav1.ListOptions) (*coordinationv1.LeaseList, bool)
	// cachedGet, if set, answers a GET instead of the server when it
	// returns true.
	cachedGet func(name string, opts metav1.GetOptions) (*coordinationv1.Lease, bool)
	watch     func(opts metav1.ListOptions) (watch.Interface, error)
	watches   atomic.Int64
	lists     atomic.Int64
}

func wrap(cs kubernetes.Interface) (*hookClient, *hooks) {
	h := &hooks{}
	return &hookClient{Interface: cs, h: h}, h
}

func (h *hooks) set(f func(h *hooks)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(h)
}

func (h *hooks) get() hooks {
	h.mu.Lock()
	defer h.mu.Unlock()
	return hooks{beforeCreate: h.beforeCreate, beforeGet: h.beforeGet, afterGet: h.afterGet, beforeUpdate: h.beforeUpdate, beforeDelete: h.beforeDelete, afterDelete: h.afterDelete, beforeList: h.beforeList, list: h.list, cachedGet: h.cachedGet, watch: h.watch}
}

func (c *hookClient) CoordinationV1() coordclient.CoordinationV1Interface {
	return hookCoord{CoordinationV1Interface: c.Interface.CoordinationV1(), h: c.h}
}

type hookCoord struct {
	coordclient.CoordinationV1Interface
	h *hooks
}

func (c hookCoord) Leases(ns string) coordclient.LeaseInterface {
	return hookLeases{LeaseInterface: c.CoordinationV1Interface.Leases(ns), h: c.h}
}

type hookLeases struct {
	coordclient.LeaseInterface
	h *hooks
}

func (l hookLeases) Create(ctx context.Context, o *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	if l.h.cut.Load() {
		return nil, errCut
	}
	if f := l.h.get().beforeCreate; f != nil {
		if err := f(o); err != nil {
			return nil, err
		}
	}
	return l.LeaseInterface.Create(ctx, o, opts)
}

func (l hookLeases) Update(ctx context.Context, o *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if l.h.cut.Load() {
		return nil, errCut
	}
	if f := l.h.get().beforeUpdate; f != nil {
		if err := f(o); err != nil {
			return nil, err
		}
	}
	return l.LeaseInterface.Update(ctx, o, opts)
}

func (l hookLeases) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	if l.h.cut.Load() {
		return errCut
	}
	hk := l.h.get()
	if f := hk.beforeDelete; f != nil {
		if err := f(name); err != nil {
			return err
		}
	}
	err := l.LeaseInterface.Delete(ctx, name, opts)
	if hk.afterDelete != nil {
		hk.afterDelete(name, err)
	}
	return err
}

func (l hookLeases) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	if l.h.cut.Load() {
		return nil, errCut
	}
	hk := l.h.get()
	if hk.beforeGet != nil {
		if err := hk.beforeGet(name); err != nil {
			return nil, err
		}
	}
	if hk.cachedGet != nil {
		if out, ok := hk.cachedGet(name, opts); ok {
			return out, nil
		}
	}
	got, err := l.LeaseInterface.Get(ctx, name, opts)
	if err == nil && hk.afterGet != nil {
		hk.afterGet(name, got)
	}
	return got, err
}

func (l hookLeases) List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	if l.h.cut.Load() {
		return nil, errCut
	}
	l.h.lists.Add(1)
	hk := l.h.get()
	if hk.beforeList != nil {
		if err := hk.beforeList(&opts); err != nil {
			return nil, err
		}
	}
	if hk.list != nil {
		if out, ok := hk.list(opts); ok {
			return out, nil
		}
	}
	return l.LeaseInterface.List(ctx, opts)
}

func (l hookLeases) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if l.h.cut.Load() {
		return nil, errCut
	}
	l.h.watches.Add(1)
	if f := l.h.get().watch; f != nil {
		return f(opts)
	}
	return l.LeaseInterface.Watch(ctx, opts)
}
