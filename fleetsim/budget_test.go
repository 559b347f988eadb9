package fleetsim

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// renewer is an agent that updates each of leases every period, as an
// agent whose loops each renew a Lease of their own does.
func renewer(period time.Duration, leases ...string) Agent {
	return func(ctx context.Context, d Deps) error {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
			for _, name := range leases {
				l, err := d.Kube.CoordinationV1().Leases("app").Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					continue
				}
				_, _ = d.Kube.CoordinationV1().Leases("app").Update(ctx, l, metav1.UpdateOptions{})
			}
		}
	}
}

// Updates of two Leases are two kinds of request (two loops), each within
// Budget.PerKind, though together they exceed it: an update is of the
// object it sends, as a get is of the name it carries. With one kind for
// every update of a resource, this fleet fails RequestBudget.
func TestUpdatesOfTwoObjectsAreTwoKinds(t *testing.T) {
	var objs []runtime.Object
	for i := range 2 {
		objs = append(objs, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: fmt.Sprint("lease-", i)}})
	}
	// 80 updates a minute of each Lease, 160 in all, against 120 of one kind.
	r := simulate(t, Config{Agents: 1, Agent: renewer(750*time.Millisecond, "lease-0", "lease-1"), Objects: objs,
		Nemesis: Nemesis{}.Only(), Duration: 5 * time.Minute, Quiet: time.Minute})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	// One Lease renewed as often as the two together breaks the budget.
	only(t, simulate(t, Config{Agents: 1, Agent: renewer(375*time.Millisecond, "lease-0"), Objects: objs[:1],
		Nemesis: Nemesis{}.Only(), Duration: 5 * time.Minute, Quiet: time.Minute}), RequestBudget)
}
