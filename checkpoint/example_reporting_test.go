package checkpoint_test

import (
	"context"
	"fmt"
	"strconv"

	"github.com/reconkit/reconkit/checkpoint"
)

// eventPrinter is an EventRecorder; a host passes one built on client-go's
// record.EventRecorder (package github.com/reconkit/reconkit/events).
type eventPrinter struct{}

func (eventPrinter) Event(eventtype, reason, _ string) { fmt.Println("event:", eventtype, reason) }

// The ConfigOK condition goes to whatever reports node conditions (a
// nodestatus provider has this ReportCondition method), observations to a
// metrics hook and events to an event recorder, each in one line of
// configuration.
func Example_reporting() {
	ctx := context.Background()
	ctrl, _ := checkpoint.New(checkpoint.Config[int]{
		Store:    &checkpoint.MemStore{},
		Parse:    func(b []byte) (int, error) { return strconv.Atoi(string(b)) },
		Validate: func(int) error { return nil },
		Local:    1,
		Conditions: checkpoint.ConditionReporterFunc(func(typ, status, reason, _ string) {
			fmt.Println("condition:", typ, status, reason)
		}),
		Metrics: checkpoint.MetricsFunc(func(o checkpoint.Observation) {
			fmt.Println("observed:", o.Event, o.Phase, o.TriesLeft)
		}),
		Events: eventPrinter{},
	})
	_, _ = ctrl.Bootstrap(ctx)
	_, _ = ctrl.Assign(ctx, []byte("4"), checkpoint.Source{UID: "cm-uid", ResourceVersion: "7"})
	_, _ = ctrl.Rollback(ctx, "latency doubled")
	// Output:
	// condition: ConfigOK True LocalConfig
	// observed: phase Local 0
	// condition: ConfigOK True AssignedOnTrial
	// observed: phase Trial 0
	// observed: trial_started Trial 2
	// event: Normal ConfigTrialStarted
	// condition: ConfigOK False RolledBackManually
	// observed: phase RolledBack 0
	// observed: rolled_back RolledBack 0
	// event: Warning ConfigRolledBack
}
