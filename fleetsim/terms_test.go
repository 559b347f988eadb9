package fleetsim

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/lease"
	"github.com/reconkit/reconkit/lbrecon"
)

// churnAgent begins a term on the Lease app/churn every period, as a
// holder that yields at every renewal does: agent-0 writes the Lease, with
// leaseTransitions one higher each time.
func churnAgent(period time.Duration) Agent {
	return func(ctx context.Context, d Deps) error {
		if d.Index != 0 {
			<-ctx.Done()
			return nil
		}
		leases := d.Kube.CoordinationV1().Leases("app")
		for sleepCtx(ctx, period) {
			l, err := leases.Get(ctx, "churn", metav1.GetOptions{})
			if err != nil {
				l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "churn"},
					Spec: coordinationv1.LeaseSpec{LeaseTransitions: ptr.To[int32](0)}}
				if l, err = leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
					continue
				}
			}
			l.Spec.HolderIdentity = ptr.To(d.Name)
			*l.Spec.LeaseTransitions++
			_, _ = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
		return nil
	}
}

// A Lease that begins a term every 2 seconds breaks TermChurn; one that
// begins one every 5 seconds (12 a minute) does not.
func TestTermChurn(t *testing.T) {
	cfg := Config{Agents: 1, Duration: 3 * time.Minute, Quiet: time.Minute, Nemesis: Nemesis{}.Only()}
	cfg.Agent = churnAgent(5 * time.Second)
	if err := simulate(t, cfg).Err(); err != nil {
		t.Fatalf("12 terms a minute: %v", err)
	}
	cfg.Agent = churnAgent(2 * time.Second)
	v := only(t, simulate(t, cfg), TermChurn)
	if !strings.Contains(v.Detail, "Lease app/churn began 16 terms within one minute") {
		t.Errorf("the violation says %q", v.Detail)
	}
}

// leaseAgent campaigns on the Lease app/leader with election/lease, and
// keeps every term it wins until it ends.
func leaseAgent(ctx context.Context, d Deps) error {
	e, err := lease.New(lease.Config{Client: d.Kube, Namespace: "app", Name: "leader", Identity: d.Name, Clock: d.Clock})
	if err != nil {
		return err
	}
	defer e.Close()
	return election.Run(ctx, e, func(ctx context.Context, _ election.Leadership) error {
		<-ctx.Done()
		return nil
	})
}

// LeftoverPreferredHolder leaves a preferred holder on the election Lease;
// election/lease's uncoordinated candidates clear it, so the terms stay
// within TermChurn's limit (the defect they were fixed for, keeping it,
// began a term every RetryPeriod: cmd/defects' lease-preferred-holder).
func TestLeftoverPreferredHolder(t *testing.T) {
	cfg := Config{Agents: 3, Agent: leaseAgent, Duration: 5 * time.Minute, Quiet: 2 * time.Minute,
		Nemesis: Nemesis{Every: time.Minute, Edits: []Edit{LeftoverPreferredHolder("app", "leader")}}.Only(OperatorEdit)}
	r := simulate(t, cfg)
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	tl := Window(r.Timeline, 0, 0, time.Hour)
	if !strings.Contains(tl, "leave preferredHolder "+RetiredHolder+" on Lease app/leader (<nil>)") {
		t.Fatalf("the edit was never made on an existing Lease:\n%s", tl)
	}
}

// A term live when the nemesis deletes a Lease outside kube-node-lease is
// not judged by OneTerm against the next term: the operator's delete hands
// the election over at once, and election's doc covers only its own
// protocol. agent-1 writes with token 2 only once the Lease is gone, while
// agent-0's term (token 1) stays live; without the exemption that is a
// OneTerm violation (TestTwoLiveTerms is the same overlap without a
// delete).
func TestDeletedLeaseHandsOver(t *testing.T) {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "leader"}}
	agent := func(ctx context.Context, d Deps) error {
		if d.Index == 0 { // writes at once, so that its term is live at the delete
			_, _ = d.Engine.Create(lbrecon.WithToken(ctx, 1), lbrecon.Object{Kind: lbrecon.KindBackend, Name: "first", Tags: []string{"t"}})
			return writer(func(Deps) uint64 { return 1 })(ctx, d)
		}
		for {
			_, err := d.Kube.CoordinationV1().Leases("kube-system").Get(ctx, "leader", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
		return writer(func(Deps) uint64 { return 2 })(ctx, d)
	}
	r := simulate(t, Config{Agents: 2, Agent: agent, Objects: []runtime.Object{lease}, Duration: 10 * time.Minute,
		Nemesis: Nemesis{}.Only(DeleteLease)})
	if len(r.Violations) > 0 {
		t.Fatalf("%v", r.Err())
	}
	if !slices.ContainsFunc(r.Timeline, func(e Entry) bool { return strings.Contains(e.What, "live when a Lease was deleted") }) {
		t.Fatalf("the terms never overlapped after the delete; timeline:\n%s", Window(r.Timeline, 0, 0, time.Hour))
	}
}
