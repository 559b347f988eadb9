package versiongatetest_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStoreConformance(t *testing.T) {
	var clk *clocktesting.FakeClock
	versiongatetest.RunStoreConformance(t, versiongatetest.StoreHarness{
		New: func(t *testing.T) func() versiongate.Store {
			clk = clocktesting.NewFakeClock(time.Now())
			s := versiongatetest.NewStore(versiongatetest.StoreConfig{Clock: clk})
			return func() versiongate.Store { return s.Conn() }
		},
		Advance: func(d time.Duration) { clk.Step(d) },
	})
}
