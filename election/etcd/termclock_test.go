package etcd_test

import (
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

// termClock is a fake clock that tells a test which timers a term's two
// loops have armed, so that the test steps it only once they are:
//
//   - keep, when not nil, receives the duration of every timer the
//     renewal loop ((*Leadership).keep) arms, once it is armed: a step the
//     test makes on the report fires it, and the test learns each pause
//     exactly instead of stepping in small increments;
//   - every expiry timer the monitor ((*Leadership).monitor) arms is
//     recorded with the instant it is due; awaitExpiry waits for one.
//
// Why the expiry needs waiting for: the monitor arms it as
// NewTimer(ValidUntil - Now()), from its own read of the clock. A test
// that steps the clock between that read and the arming sets the timer
// late by the whole step, so on the fake clock the term outlives
// ValidUntil. On a real clock that window is nanoseconds; on a fake clock
// stepped from another goroutine it is a flake, seen under load. A test
// that steps the clock after a term started, or after a renewal moved
// ValidUntil, and then expects something at or around ValidUntil calls
// awaitExpiry(ValidUntil) before its first step.
//
// The other tests that step a fake clock while a term lives expect
// nothing of its expiry, so a late one cannot fail them: the spin tests
// and TestEtcdKeyDeletedEndsTermAtNextRenewal stay far before ValidUntil
// and require the term live or ended by a renewal; the budget tests
// (answers_test.go) bound requests, and a term that outlives ValidUntil
// on the fake clock renews no faster (backoff.Renewal.Pause never pauses
// less than its first pause); the guard tests never step.
type termClock struct {
	*testingclock.FakeClock
	keep chan time.Duration

	// hold, when set before the term starts, is called on the monitor's
	// goroutine after it read the clock for an expiry and before that
	// timer is armed: TestEtcdTermClockStagesTheLateExpiry stages the race
	// with it.
	hold func()
	// waiting, when set, is called each time awaitExpiry finds the expiry
	// it waits for not armed yet, before it waits.
	waiting func()

	mu       sync.Mutex
	expiries []time.Time   // due instants of the monitor's expiry timers, in arming order
	changed  chan struct{} // closed and replaced when expiries grows
}

// newTermClock returns a termClock at the current time, whose keep
// reports go to keep (nil: not reported).
func newTermClock(keep chan time.Duration) *termClock {
	return &termClock{FakeClock: testingclock.NewFakeClock(time.Now()), keep: keep, changed: make(chan struct{})}
}

// NewTimer arms the timer, then reports it as the type's doc says.
func (c *termClock) NewTimer(d time.Duration) clock.Timer {
	switch timerCaller() {
	case ".(*Leadership).keep":
		t := c.FakeClock.NewTimer(d)
		if c.keep != nil {
			c.keep <- d
		}
		return t
	case ".(*Leadership).monitor": // its expiry; its re-watch timers are armed by closures
		if c.hold != nil {
			c.hold()
		}
		due := c.FakeClock.Now().Add(d)
		t := c.FakeClock.NewTimer(d)
		c.mu.Lock()
		c.expiries = append(c.expiries, due)
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
		return t
	default:
		return c.FakeClock.NewTimer(d)
	}
}

// timerCaller returns the name of the function that called
// termClock.NewTimer from its last dot on ("" if none matches): the loop
// that arms the timer, or, for a closure, its own name (monitor.func2).
func timerCaller() string {
	pc := make([]uintptr, 16)
	frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc)])
	for found := false; ; {
		f, more := frames.Next()
		if found {
			for _, name := range []string{".(*Leadership).keep", ".(*Leadership).monitor"} {
				if strings.HasSuffix(f.Function, name) {
					return name
				}
			}
			return ""
		}
		found = strings.HasSuffix(f.Function, ".(*termClock).NewTimer")
		if !more {
			return ""
		}
	}
}

// awaitExpiry returns once the monitor has armed an expiry timer due at
// at, failing the test if none is within spinDeadline: from then on a
// step of the clock cannot delay that timer.
func (c *termClock) awaitExpiry(t *testing.T, at time.Time, what string) {
	t.Helper()
	if armed, ok := c.waitExpiry(at, time.After(spinDeadline)); !ok {
		require.FailNowf(t, "timed out", "waiting %v for %s, an expiry timer due at %v; armed: %v", spinDeadline, what, at, armed)
	}
}

// waitExpiry is awaitExpiry for any goroutine: it reports false, and the
// expiries armed, if none due at at is armed before limit.
func (c *termClock) waitExpiry(at time.Time, limit <-chan time.Time) ([]time.Time, bool) {
	for {
		c.mu.Lock()
		armed := slices.ContainsFunc(c.expiries, at.Equal)
		changed, expiries := c.changed, slices.Clone(c.expiries)
		c.mu.Unlock()
		if armed {
			return expiries, true
		}
		if c.waiting != nil {
			c.waiting()
		}
		select {
		case <-changed:
		case <-limit:
			return expiries, false
		}
	}
}

// lastExpiry returns the instant the latest expiry timer the monitor
// armed is due, and whether it armed any.
func (c *termClock) lastExpiry() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.expiries) == 0 {
		return time.Time{}, false
	}
	return c.expiries[len(c.expiries)-1], true
}
