package lease

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

// armedClock is a fake clock that remembers the instants its timers were
// armed for, so that a test waits for what the code did (the renewal
// timer armed for its instant) rather than for a count of timers, which
// every timer added to the code would change.
type armedClock struct {
	*testingclock.FakeClock
	mu    sync.Mutex
	armed map[time.Time]bool
}

func newArmedClock(t time.Time) *armedClock {
	return &armedClock{FakeClock: testingclock.NewFakeClock(t), armed: map[time.Time]bool{}}
}

// NewTimer implements clock.Clock.
func (c *armedClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.arm(d)
	return &armedTimer{Timer: t, c: c}
}

func (c *armedClock) arm(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed[c.Now().Add(d)] = true
}

// armedFor reports whether a timer was armed (created or reset) to fire
// at the instant at.
func (c *armedClock) armedFor(at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.armed[at]
}

type armedTimer struct {
	clock.Timer
	c *armedClock
}

// Reset implements clock.Timer.
func (t *armedTimer) Reset(d time.Duration) bool {
	active := t.Timer.Reset(d)
	t.c.arm(d)
	return active
}
