package ccmfleet_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/reconkit/reconkit/examples/ccmfleet"
	"github.com/reconkit/reconkit/fleetsim"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
)

// The fleet's own invariants, checked while the nemesis runs (liveChecks), each
// with the guarantee it checks. fleetsim checks the others as the run goes
// on: FenceOrder (the provider's fence never lets a lower token through
// after a higher one), RequestBudget (each replica's requests to the
// apiserver and calls to the provider per minute of simulated time, and
// at one instant; fleetConfig sets the budget), TermChurn, OneTerm, Stops
// and Lives, and Converges at the end.
const (
	// NoDuplicate: no two objects at the provider with one Service's tag,
	// one kind and one name for longer than the declared lag and
	// dupMargin.
	NoDuplicate fleetsim.Invariant = "no-duplicate"
	// NoLeak: when a Service loses the cleanup finalizer (removed, or the
	// Service gone), nothing with its tag is at the provider.
	NoLeak fleetsim.Invariant = "no-leak"
)

const (
	noDuplicateGuarantee = "lbrecon (doc.go), Crash mid-create and Eventual consistency: a creation of unknown outcome holds " +
		"its name, and an ack is forgotten only at a listing past its horizon, so a lagging listing (one that goes " +
		"backwards) never causes a second creation; Duplicates: one that exists anyway is destroyed once a listing at " +
		"the horizon still shows it"
	noLeakGuarantee = "lbrecon/ccm (doc.go): GetLoadBalancer answers \"exists\" while anything of the Service's may be at " +
		"the provider, so the service controller removes the cleanup finalizer only once EnsureLoadBalancerDeleted " +
		"found nothing left"
)

// dupMargin is how much longer than the declared lag (replicaLag) two
// copies of one object may coexist at the provider before NoDuplicate is
// violated: lbrecon destroys a duplicate once a listing started at the
// horizon still shows both, so one made by a reconciler's own creation
// (a lagging listing taken for a free name) lives the lag and a pass
// more; none should be made at all.
const dupMargin = time.Second

// liveChecks checks NoDuplicate and NoLeak until ctx ends.
func liveChecks(ctx context.Context, x *fleetsim.World) {
	var checks sync.WaitGroup
	checks.Go(func() { noDuplicates(ctx, x) })
	checks.Go(func() { noLeaks(ctx, x) })
	checks.Wait()
}

// identity is what makes two objects at the provider one object: the
// Service's tag, the kind and the name.
type identity struct{ tag, kind, name string }

// ownedTag returns the tag by which a Service owns o, or "".
func ownedTag(o lbrecon.Object) string {
	for _, t := range o.Tags {
		if strings.HasPrefix(t, ccm.DefaultTagKey+"=") {
			return t
		}
	}
	return ""
}

// noDuplicates checks NoDuplicate at every change of the provider, and
// when a duplicate seen earlier reaches its bound.
func noDuplicates(ctx context.Context, x *fleetsim.World) {
	bound := replicaLag + dupMargin
	since := map[identity]time.Time{} // when each duplicate seen began
	var bad string
	var fresh bool
	// judge notes the duplicates objs hold, and reports whether one
	// overstayed its bound (bad) or a new one began (fresh: its bound is a
	// new deadline).
	judge := func(objs []lbrecon.Object) bool {
		now := time.Now()
		ids := map[identity][]string{}
		for _, o := range objs {
			if tag := ownedTag(o); tag != "" {
				k := identity{tag, o.Kind, o.Name}
				ids[k] = append(ids[k], o.ID)
			}
		}
		for k, began := range since {
			if len(ids[k]) < 2 {
				delete(since, k)
				x.Note("duplicate %s %s is one again, after %s", k.kind, k.name, now.Sub(began))
			}
		}
		for k, list := range ids {
			if len(list) < 2 {
				continue
			}
			began, seen := since[k]
			switch {
			case !seen:
				since[k] = now
				fresh = true
				x.Note("duplicate: %s %s exists %d times (%s)", k.kind, k.name, len(list), strings.Join(list, ", "))
			case now.Sub(began) > bound:
				bad = fmt.Sprintf("%s %s has existed %d times (%s) for %s, longer than the declared lag %s and %s",
					k.kind, k.name, len(list), strings.Join(list, ", "), now.Sub(began), replicaLag, dupMargin)
			}
		}
		return fresh || bad != ""
	}
	for ctx.Err() == nil {
		wait := time.Hour
		for _, began := range since {
			wait = min(wait, time.Until(began.Add(bound))+time.Millisecond)
		}
		fresh = false
		sub, cancel := context.WithTimeout(ctx, wait)
		if x.Provider().WaitFor(sub, judge) != nil && ctx.Err() == nil {
			judge(x.Provider().Objects()) // at the deadline
		}
		cancel()
		if bad != "" {
			x.Violate(NoDuplicate, noDuplicateGuarantee, "", "%s", bad)
			return
		}
	}
}

// noLeaks checks NoLeak at the instant a Service is seen to lose the
// cleanup finalizer, from a watch of the Services (listed again when the
// watch ends, as at an apiserver restart).
func noLeaks(ctx context.Context, x *fleetsim.World) {
	services := x.Observer().CoreV1().Services(metav1.NamespaceAll)
	held := map[types.UID]string{} // Services seen with the finalizer
	check := func(uid types.UID, name, how string) {
		delete(held, uid)
		tag := ccm.DefaultTagKey + "=" + string(uid)
		var left []string
		for _, o := range x.Provider().Objects() {
			if o.HasTag(tag) {
				left = append(left, fmt.Sprintf("%s %s (%s)", o.Kind, o.Name, o.ID))
			}
		}
		if len(left) > 0 {
			x.Violate(NoLeak, noLeakGuarantee, "", "Service %s (%s) %s while %d of its objects are at the provider: %s",
				name, uid, how, len(left), strings.Join(left, ", "))
			return
		}
		x.Note("Service %s (%s) %s; nothing of its at the provider", name, uid, how)
	}
	note := func(svc *v1.Service, gone bool) {
		has := !gone && slices.Contains(svc.Finalizers, ccmfleet.Finalizer)
		name := svc.Namespace + "/" + svc.Name
		_, had := held[svc.UID]
		switch {
		case has:
			held[svc.UID] = name
		case had && gone:
			check(svc.UID, name, "is gone")
		case had:
			check(svc.UID, name, "lost its cleanup finalizer")
		}
	}
	for ctx.Err() == nil {
		list, err := services.List(ctx, metav1.ListOptions{})
		if err != nil {
			pause(ctx, time.Second)
			continue
		}
		listed := map[types.UID]bool{}
		for i := range list.Items {
			listed[list.Items[i].UID] = true
			note(&list.Items[i], false)
		}
		for _, uid := range slices.Sorted(maps.Keys(held)) {
			if !listed[uid] {
				check(uid, held[uid], "is gone")
			}
		}
		wi, err := services.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			pause(ctx, time.Second)
			continue
		}
		if follow(ctx, wi, note) == 0 {
			// A watch that ended with nothing (a server restart, a 410)
			// is not listed again at once: no spin, even in the checker.
			pause(ctx, time.Second)
		}
	}
}

// follow passes the watch's Service events to note until the watch or ctx
// ends, and returns how many it passed.
func follow(ctx context.Context, wi watch.Interface, note func(*v1.Service, bool)) int {
	defer wi.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return n
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return n
			}
			if svc, ok := ev.Object.(*v1.Service); ok {
				n++
				note(svc, ev.Type == watch.Deleted)
			}
		}
	}
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
