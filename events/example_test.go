package events_test

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/events"
)

// The checkpoint controller's events are recorded about the host's Node.
// A host passes the recorder of an event broadcaster
// (record.NewBroadcaster, then NewRecorder); the fake prints them.
func Example() {
	fake := record.NewFakeRecorder(10)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	ctx := context.Background()
	ctrl, _ := checkpoint.New(checkpoint.Config[int]{
		Store:    &checkpoint.MemStore{},
		Parse:    func(b []byte) (int, error) { return strconv.Atoi(string(b)) },
		Validate: func(int) error { return nil },
		Local:    1,
		Events:   events.ForObject(fake, node),
		Clock:    clocktesting.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)),
	})
	_, _ = ctrl.Bootstrap(ctx)
	_, _ = ctrl.Assign(ctx, []byte("4"), checkpoint.Source{UID: "cm-uid", ResourceVersion: "7"})
	_, _ = ctrl.Rollback(ctx, "latency doubled")
	for len(fake.Events) > 0 {
		fmt.Println(<-fake.Events)
	}
	// Output:
	// Normal ConfigTrialStarted using assigned checkpoint "cm-uid_7" on trial since 2030-01-02T03:04:05Z (2 more starts allowed)
	// Warning ConfigRolledBack RolledBackManually: trial of checkpoint "cm-uid_7" rolled back by request: latency doubled; using the local configuration
}
