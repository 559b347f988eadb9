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

// The gate reports its readiness as a node condition: a node-status
// provider (nodestatus.Provider) is a ConditionReporter as it is. With
// RejoinAfterRecordLoss, a lost record turns the condition False and Run
// publishes a new one instead of returning.
func ExampleConfig_conditions() {
	store := versiongatetest.NewStore(versiongatetest.StoreConfig{})
	v1 := versiongate.Version{Release: versiongate.Release{Major: 1}}
	status, _ := versiongate.Status{State: versiongate.StateDone, Version: v1, MinimumCompatibleRelease: v1.Release}.Encode()
	store.SetStatus(status)
	admitted := make(chan struct{}, 1)
	report := versiongate.ConditionReporterFunc(func(conditionType, status, reason, _ string) {
		fmt.Println(conditionType, status, reason)
		if status == versiongate.ConditionTrue {
			admitted <- struct{}{}
		}
	})
	gate, err := versiongate.New(versiongate.Config{
		Store:                 store.Conn(),
		NodeID:                "node-a",
		Version:               v1,
		Candidate:             electiontest.NewElection().NewCandidate("node-a"),
		Reconcile:             func(context.Context, election.Leadership) error { return nil },
		Conditions:            report,
		RejoinAfterRecordLoss: true,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gate.Run(ctx) }()
	<-admitted // WaitReady would return now
	cancel()
	fmt.Println("Run:", <-done)
	// Output:
	// ReleaseReady False RecordPending
	// ReleaseReady True ReleaseAdmitted
	// ReleaseReady False GateStopped
	// Run: <nil>
}
