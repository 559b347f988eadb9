package fleetsim

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// watchLeases writes every change of a Lease's holder to the timeline, from
// the checks' own client, until ctx ends. It lists again after its watch
// ends (an apiserver restart) or fails.
func (w *world) watchLeases(ctx context.Context) {
	holders := map[string]string{}
	leases := w.observer.CoordinationV1().Leases("")
	note := func(l *coordinationv1.Lease, deleted bool) {
		key := l.Namespace + "/" + l.Name
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		old, seen := holders[key]
		switch {
		case deleted:
			delete(holders, key)
			w.tl.add("apiserver", "lease %s deleted (holder %q)", key, old)
		case !seen || old != holder:
			holders[key] = holder
			w.tl.add("apiserver", "lease %s holder %q -> %q", key, old, holder)
		}
	}
	for ctx.Err() == nil {
		list, err := leases.List(ctx, metav1.ListOptions{})
		if err != nil {
			if !sleepCtx(ctx, time.Second) {
				return
			}
			continue
		}
		for i := range list.Items {
			note(&list.Items[i], false)
		}
		wi, err := leases.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			if !sleepCtx(ctx, time.Second) {
				return
			}
			continue
		}
		w.follow(ctx, wi, note)
	}
}

// follow passes the watch's Lease events to note until the watch or ctx
// ends, and stops the watch.
func (w *world) follow(ctx context.Context, wi watch.Interface, note func(*coordinationv1.Lease, bool)) {
	defer wi.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return
			}
			if l, ok := ev.Object.(*coordinationv1.Lease); ok {
				note(l, ev.Type == watch.Deleted)
			}
		}
	}
}

// sleepCtx waits d or until ctx ends, and reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
