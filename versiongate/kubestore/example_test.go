package kubestore_test

import (
	"context"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/election/lease"
	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
)

// A gate on the Kubernetes API alone: the store and a Lease election share
// one client (here kubefake, which enforces resourceVersions as the
// apiserver does, so the example runs offline). The first node finds no
// status, reconciles, and writes it; then it may serve.
func ExampleNew() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := kubefake.NewClientset()

	store, err := kubestore.New(kubestore.Config{Client: cs, Namespace: "agents", Gate: "fleet"})
	if err != nil {
		fmt.Println(err)
		return
	}
	elector, err := lease.New(lease.Config{Client: cs, Namespace: "agents", Name: "fleet-leader", Identity: "node-a"})
	if err != nil {
		fmt.Println(err)
		return
	}
	version, _ := versiongate.ParseVersion("1.4.0")
	gate, err := versiongate.New(versiongate.Config{
		Store:                    store,
		NodeID:                   "node-a",
		Version:                  version,
		MinimumCompatibleRelease: versiongate.Release{Major: 1, Minor: 3},
		Candidate:                elector,
		Reconcile: func(ctx context.Context, l versiongate.Term) error {
			return nil // converge shared state, carrying l.Token()
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error, 1)
	go func() { done <- gate.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if err := gate.WaitReady(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("serving")

	// The leader (this node) finishes its term's start: its conditioned
	// status write is validated, or retried with a newer listing.
	for {
		changed := gate.PhaseChanged()
		if gate.Phase() == versiongate.PhaseDone {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
	st, _ := store.ReadStatus(ctx)
	status, err := versiongate.DecodeStatus(st.Value)
	if err != nil {
		fmt.Println(err)
	}
	fmt.Println("status:", status.State, "minimum compatible", status.MinimumCompatibleRelease)
	leases, _ := cs.CoordinationV1().Leases("agents").List(ctx, metav1.ListOptions{})
	var names []string
	for _, l := range leases.Items {
		if l.Labels[kubestore.LabelRole] == kubestore.RoleReaper {
			continue // fleet-reaper, held by a gate that watches the records' liveness
		}
		names = append(names, strings.TrimSpace(l.Name+" "+l.Labels[kubestore.LabelRole]))
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Println(n)
	}
	// Output:
	// serving
	// status: done minimum compatible 1.3.0
	// fleet-leader
	// fleet-node-a record
	// fleet-status status
	// fleet.node-a heartbeat
}
