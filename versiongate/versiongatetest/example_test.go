package versiongatetest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/electiontest"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// A gate on the in-memory store with the in-memory election, as a host's
// test runs it: no etcd, and waits on a deadline instead of polling.
func Example() {
	store := versiongatetest.NewStore(versiongatetest.StoreConfig{})
	gate, err := versiongate.New(versiongate.Config{
		Store:     store.Conn(),
		NodeID:    "node-a",
		Version:   versiongate.Version{Release: versiongate.Release{Major: 2}},
		Candidate: electiontest.NewElection().NewCandidate("node-a"),
		Reconcile: func(ctx context.Context, l election.Leadership) error { return nil },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- gate.Run(run) }()

	fmt.Println("leading:", versiongatetest.WaitLeading(ctx, gate, true) == nil)
	fmt.Println("done:", versiongatetest.WaitPhase(ctx, gate, versiongate.PhaseDone) == nil)
	stop()
	fmt.Println("Run:", <-done)
	// Output:
	// leading: true
	// done: true
	// Run: <nil>
}
