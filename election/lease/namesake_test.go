package lease_test

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/election/lease"
)

// A server that returns more than the Lease named by the field selector
// (client-go's fake clientset ignores field selectors on List) does not
// make a candidate take another Lease of the namespace for its own: it
// reads only the Lease of its name.
func TestCandidateReadsOnlyItsOwnLease(t *testing.T) {
	other := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "aaa-someone-elses"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("stranger"),
			LeaseDurationSeconds: ptr.To[int32](3600),
			RenewTime:            &metav1.MicroTime{Time: time.Now()},
		},
	}
	cs := fake.NewClientset(other)
	e, err := lease.New(lease.Config{Client: cs, Namespace: "ns", Name: "mine", Identity: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	closeOnCleanup(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ch := e.Observe(ctx)
	select {
	case info := <-ch:
		if !info.IsZero() {
			t.Fatalf("Observe reports %+v as the leader of Lease mine: it read Lease %s", info, other.Name)
		}
	case <-ctx.Done():
		t.Fatal("no observation within a minute")
	}
	l, err := e.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Resign(context.Background())
	got, err := cs.CoordinationV1().Leases("ns").Get(ctx, other.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *got.Spec.HolderIdentity != "stranger" {
		t.Fatalf("Lease %s now held by %q: the candidate wrote another Lease", other.Name, *got.Spec.HolderIdentity)
	}
}
