package nodestatus

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"
)

// idleAtArm records, as a retry's timer is armed, whether the jobs looked
// idle then: whether a test stepping its fake clock while the controller
// is idle could step it in that instant.
type idleAtArm struct {
	*testclock.FakeClock
	jobs  *jobState
	idles []bool
}

func (c *idleAtArm) NewTimer(d time.Duration) clock.Timer {
	c.idles = append(c.idles, c.jobs.idle(c.Now()))
	return c.FakeClock.NewTimer(d)
}

// A retry's wait is never idle before its timer is armed, and once armed
// it is idle exactly until the timer's instant.
func TestRetryWaitIsDueUntilItsTimerIsArmed(t *testing.T) {
	fc := testclock.NewFakeClock(time.Unix(0, 0))
	var j jobState
	clk := &idleAtArm{FakeClock: fc, jobs: &j}
	rc := retryClock{Clock: clk, jobs: &j, kind: retryStatus}
	j.start()
	j.wait(retryStatus)
	tm := rc.NewTimer(time.Second)
	require.Equal(t, []bool{false}, clk.idles, "idle while the timer was being armed")
	require.True(t, j.idle(fc.Now()), "idle once armed, before its instant")
	fc.Step(999 * time.Millisecond)
	require.True(t, j.idle(fc.Now()))
	fc.Step(time.Millisecond)
	require.False(t, j.idle(fc.Now()), "due at the timer's instant")
	select {
	case <-tm.C():
	default:
		t.Fatal("the timer did not fire at the instant recorded")
	}
}
