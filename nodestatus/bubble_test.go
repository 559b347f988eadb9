package nodestatus_test

import (
	"testing/synctest"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/nodestatus"
)

// bubbleConfig is fakeConfig for a test that runs in a synctest bubble.
// The controller keeps the real clock, which in a bubble is the bubble's
// time: it moves only when every goroutine of the bubble is blocked, and
// then straight to the next timer due. A loop's waits take no real time,
// and no test steps a clock or asks a controller whether it is idle.
func bubbleConfig(cs *fake.Clientset, p nodestatus.NodeProvider) nodestatus.Config {
	return nodestatus.Config{Client: cs, Node: testNode("vk-0"), Provider: p, Clock: clock.RealClock{}}
}

// pass lets d of the bubble's time go by, then waits until every goroutine
// of the bubble is blocked: what came due by then has been handled. Call
// it only inside a bubble.
func pass(d time.Duration) {
	<-time.After(d)
	synctest.Wait()
}
