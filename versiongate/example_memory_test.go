package versiongate_test

import (
	"context"
	"fmt"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/electiontest"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// A gate without a server: the in-memory store and the in-memory election.
// The elector is the Candidate as it is, and the leader work has
// election.Run's callback type.
func Example_inMemory() {
	store := versiongatetest.NewStore(versiongatetest.StoreConfig{})
	elector := electiontest.NewElection().NewCandidate("node-a")
	lead := func(ctx context.Context, l election.Leadership) error {
		fmt.Println("reconcile with token", l.Token())
		return nil
	}
	gate, err := versiongate.New(versiongate.Config{
		Store:     store.Conn(),
		NodeID:    "node-a",
		Version:   versiongate.Version{Release: versiongate.Release{Major: 1}},
		Candidate: elector,
		Reconcile: lead,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gate.Run(ctx) }()

	if err := gate.WaitReady(ctx); err != nil {
		fmt.Println(err)
	}
	if err := versiongatetest.WaitPhase(ctx, gate, versiongate.PhaseDone); err != nil {
		fmt.Println(err)
	}
	value, _ := store.Status()
	status, _ := versiongate.DecodeStatus(value)
	fmt.Println("status:", status)
	cancel()
	fmt.Println("Run:", <-done)
	// Output:
	// reconcile with token 1
	// status: done at 1.0.0, minimum compatible release 0.0.0
	// Run: <nil>
}
