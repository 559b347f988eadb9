package lease_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/lease"
	"github.com/reconkit/reconkit/kubefake"
)

// A candidate on a Kubernetes Lease (here on a fake clientset, so the
// example runs offline) campaigns, leads with a term whose token comes from
// leaseTransitions, and resigns, which clears holderIdentity so that any
// follower, ours or client-go's, takes over at once.
//
// In a real program, gate the leader's own writes, once per term, with
// GuardedConfig:
//
//	cs := kubernetes.NewForConfigOrDie(lease.GuardedConfig(restConfig, l))
//
// so that every mutating request fails with ErrNotLeader unless the term l
// is valid at that moment. The elector's own client must stay ungated.
func ExampleNew() {
	// kubefake, not client-go's fake clientset: it enforces
	// resourceVersions as the apiserver does, without which two candidates
	// can both take the Lease. Its clock stamps the Lease's creation.
	cs := kubefake.Config{Clock: clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0))}.NewClientset()
	e, err := lease.New(lease.Config{
		Client:    cs,
		Namespace: "kube-system",
		Name:      "my-controller",
		Identity:  "node-a",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	l, err := e.Campaign(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	info, _ := e.Leader(ctx)
	// The token is the Lease's creation second, then its transitions.
	fmt.Printf("%s leads with token %d<<32 | %d\n", info.Identity, l.Token()>>32, l.Token()&0xffffffff)
	_, expiring := l.(election.Expiring)
	fmt.Println("term has a ValidUntil:", expiring)

	if err := l.Resign(ctx); err != nil {
		fmt.Println(err)
		return
	}
	_, err = e.Leader(ctx)
	fmt.Println("after Resign:", errors.Is(err, election.ErrNoLeader))
	fmt.Println("term ended:", context.Cause(l.Context()))
	// Output:
	// node-a leads with token 1800000000<<32 | 1
	// term has a ValidUntil: true
	// after Resign: true
	// term ended: election: resigned
}
