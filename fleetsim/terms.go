package fleetsim

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// MaxTermsPerMinute is how many terms [TermChurn] lets one Lease begin
// within any minute of simulated time. A term ends at a fault (a crash,
// a partition, a deleted Lease, an expiry) or a resign, and the next
// begins after a pause; with the nemesis's mean of one fault every 20
// seconds or more, a fleet that keeps its terms begins a few a minute
// (versiongate's pause after a failed term doubles from 100ms, so even a
// leader that fails every term begins fewer than 10 in its first minute),
// while a Lease that makes its holder yield at every renewal (a leftover
// preferred holder) begins one every RetryPeriod, 30 a minute with
// election/lease's default of 2 seconds.
const MaxTermsPerMinute = 15

// termCount is what the term watch knows of one Lease.
type termCount struct {
	uid         types.UID
	transitions int32
	terms       []time.Time // when each term of the last minute began
}

// terms checks [TermChurn] from the Lease changes the world's own watch
// sees: each increment of a Lease's leaseTransitions is a new term (an
// election's, a reaper's), and a Lease created again counts one.
type terms struct {
	w      *world
	leases map[string]*termCount
}

// note counts the terms l shows since the last change seen of it.
func (t *terms) note(l *coordinationv1.Lease, deleted bool) {
	if l.Namespace == "kube-node-lease" {
		return // heartbeats, not terms
	}
	key := l.Namespace + "/" + l.Name
	if deleted {
		delete(t.leases, key)
		return
	}
	var n int32
	if l.Spec.LeaseTransitions != nil {
		n = *l.Spec.LeaseTransitions
	}
	c, ok := t.leases[key]
	if !ok || c.uid != l.UID {
		if !ok {
			c = &termCount{}
			t.leases[key] = c
		}
		c.uid, c.transitions = l.UID, n
		if ok || n > 0 {
			c.terms = append(c.terms, time.Now()) // created (again) with a term
		}
	} else if n > c.transitions {
		for range min(n-c.transitions, int32(MaxTermsPerMinute)+1) {
			c.terms = append(c.terms, time.Now())
		}
		c.transitions = n
	}
	now := time.Now()
	for len(c.terms) > 0 && now.Sub(c.terms[0]) >= time.Minute {
		c.terms = c.terms[1:]
	}
	if len(c.terms) > MaxTermsPerMinute {
		holder, preferred := "", ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		if l.Spec.PreferredHolder != nil {
			preferred = fmt.Sprintf(", preferred holder %q", *l.Spec.PreferredHolder)
		}
		t.w.violate(TermChurn, holder, "Lease %s began %d terms within one minute (limit %d; leaseTransitions %d, holder %q%s)",
			key, len(c.terms), MaxTermsPerMinute, n, holder, preferred)
		c.terms = nil // reported
	}
}

// watchTerms checks TermChurn until ctx ends, from a watch of every Lease
// of the checks' own client; it lists again after its watch ends.
func (w *world) watchTerms(ctx context.Context) {
	t := &terms{w: w, leases: map[string]*termCount{}}
	leases := w.observer.CoordinationV1().Leases("")
	for ctx.Err() == nil {
		list, err := leases.List(ctx, metav1.ListOptions{})
		if err != nil {
			if !sleepCtx(ctx, time.Second) {
				return
			}
			continue
		}
		for i := range list.Items {
			t.note(&list.Items[i], false)
		}
		wi, err := leases.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			if !sleepCtx(ctx, time.Second) {
				return
			}
			continue
		}
		w.follow(ctx, wi, t.note)
	}
}
