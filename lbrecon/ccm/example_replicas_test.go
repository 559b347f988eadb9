package ccm_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cloud-provider/api"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/electiontest"
	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// Two cloud-controller-manager replicas on one election (in a cluster, a
// Lease: election/lease), sharing the apiserver (here kubefake) and the
// provider (here lbrecontest, whose listing lags 5 s, with a fence that
// refuses a deposed term's writes). The first leader sends the Service's
// first creations and is deposed before any listing shows them; the
// second, a fresh process, finds them in the journal, creates nothing
// twice, converges, and deletes the load balancer once the Service no
// longer wants one.
func Example_twoReplicas() {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	engine := lbrecontest.New(lbrecontest.Config{Clock: clk, Pending: time.Second, ListLag: 5 * time.Second})
	fence := lbrecon.NewFence("provider", 0, "clear the provider's fence")
	clientset := kubefake.NewClientset()
	elect := electiontest.NewElection()
	mapping := ccm.Funcs{LoadBalancerFunc: func(_ context.Context, _ string, svc *v1.Service, nodes []*v1.Node) (lbrecon.LoadBalancer, error) {
		ports, err := ccm.ServicePorts(svc)
		if err != nil {
			return lbrecon.LoadBalancer{}, err
		}
		return lbrecon.LoadBalancer{ID: "lb-shared", Suffix: string(svc.UID), Ports: ports,
			Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10")}, Targets: ccm.NodeTargets(nodes)}, nil
	}}

	// replica starts one CCM process: it campaigns, and its Balancer
	// writes with the token of the term it won while that term lasts.
	replica := func(name string) (*ccm.Balancer, election.Leadership, error) {
		term, err := elect.NewCandidate(name).Campaign(ctx)
		if err != nil {
			return nil, nil, err
		}
		b, err := ccm.New(ccm.Config{
			Engine:  engine,
			Mapping: mapping,
			Token: func(context.Context) (uint64, error) {
				if err := term.Context().Err(); err != nil {
					return 0, fmt.Errorf("%s: %w", name, context.Cause(term.Context()))
				}
				return term.Token(), nil
			},
			Admit:      fence.Admit,
			Journal:    ccm.NewConfigMapJournal(clientset.CoreV1(), ccm.ConfigMapJournalOptions{}),
			Reconciler: lbrecon.Config{Clock: clk, ListLag: 5 * time.Second},
			// The fake clock is stepped only between calls: no call
			// may wait on it, not even for a confirmation.
			TeardownWait: -1,
		})
		return b, term, err
	}

	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "6f1c"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Name: "http", Port: 80, NodePort: 30080}}}}
	nodes := []*v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}}}}}

	first, term1, err := replica("ccm-a")
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = first.EnsureLoadBalancer(ctx, "cluster-1", svc, nodes)
	fmt.Println("ccm-a, term", term1.Token(), "retry:", isRetryError(err), "created so far:", len(engine.Objects()))
	elect.Depose() // ccm-a loses its Lease

	second, term2, err := replica("ccm-b")
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = first.EnsureLoadBalancer(ctx, "cluster-1", svc, nodes)
	fmt.Println("ccm-a after losing its term:", err != nil)
	_, exists, err := second.GetLoadBalancer(ctx, "cluster-1", svc)
	fmt.Println("ccm-b, term", term2.Token(), "finds the load balancer:", exists, err)
	for {
		st, err := second.EnsureLoadBalancer(ctx, "cluster-1", svc, nodes)
		var retry *api.RetryError
		if errors.As(err, &retry) {
			clk.Step(retry.RetryAfter())
			continue
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("ingress:", st.Ingress[0].IP, "objects:", len(engine.Objects()), "(each created once)")
		break
	}

	svc.Spec.Type, svc.Spec.Ports[0].NodePort = v1.ServiceTypeClusterIP, 0
	for {
		if _, exists, err := second.GetLoadBalancer(ctx, "cluster-1", svc); err != nil || !exists {
			fmt.Println("deleted:", err == nil, "objects left:", len(engine.Objects()))
			break
		}
		err := second.EnsureLoadBalancerDeleted(ctx, "cluster-1", svc)
		var retry *api.RetryError
		if errors.As(err, &retry) {
			clk.Step(retry.RetryAfter())
		} else if err != nil {
			fmt.Println(err)
			return
		}
	}
	// Output:
	// ccm-a, term 1 retry: true created so far: 1
	// ccm-a after losing its term: true
	// ccm-b, term 2 finds the load balancer: true <nil>
	// ingress: 192.0.2.10 objects: 4 (each created once)
	// deleted: true objects left: 0
}

func isRetryError(err error) bool {
	var re *api.RetryError
	return errors.As(err, &re)
}
