package kubestore_test

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// The Kubernetes store passes the store conformance suite on a real
// kube-apiserver, each case on a gate of its own, with record expiry
// judged on a fake clock the suite steps by a store running WatchRecords
// beside the suite's, as a gate does (the reaper).
func TestConformanceAPIServer(t *testing.T) {
	cfg := apiServer(t)
	cs := clientFor(t, cfg)
	var clk *clocktesting.FakeClock
	versiongatetest.RunStoreConformance(t, versiongatetest.StoreHarness{
		New: func(t *testing.T) func() versiongate.Store {
			gate := uniqueGate("conf")
			clk = clocktesting.NewFakeClock(time.Now())
			c := clk
			runWatch(t, newStore(t, cs, gate, c))
			return func() versiongate.Store { return newStore(t, cs, gate, c) }
		},
		Advance: func(d time.Duration) { clk.Step(d) },
	})
}

// And on kubefake, which enforces resourceVersion preconditions as the
// apiserver does.
func TestConformanceKubefake(t *testing.T) {
	var clk *clocktesting.FakeClock
	versiongatetest.RunStoreConformance(t, versiongatetest.StoreHarness{
		New: func(t *testing.T) func() versiongate.Store {
			cs := kubefake.NewClientset()
			clk = clocktesting.NewFakeClock(time.Now())
			c := clk
			runWatch(t, newStore(t, cs, "conf", c))
			return func() versiongate.Store { return newStore(t, cs, "conf", c) }
		},
		Advance: func(d time.Duration) { clk.Step(d) },
	})
}
