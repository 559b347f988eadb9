package fleetsim

import (
	"math"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// DefaultMaxDrift is the default Nemesis.MaxDrift: each agent's clock
// runs within 2% of the apiserver's, so that any two differ by less than
// 4%, within the smallest margin the packages document (election/lease:
// rates that differ by less than the skew margin over a lease duration, a
// margin of at least a twentieth; versiongate/kubestore: less than the
// margin over a TTL).
const DefaultMaxDrift = 0.02

// driftClock is an agent's clock: simulated time at a rate of its own.
// Its reading is continuous across rate changes; a timer or ticker runs for
// its duration at the rate when it was set (or reset), and what its channel
// delivers is the simulated time, not this clock's reading.
type driftClock struct {
	mu     sync.Mutex
	rate   float64   // this clock's seconds per simulated second
	anchor time.Time // simulated time of the last rate change
	read   time.Time // this clock's reading then
}

var _ clock.WithTicker = (*driftClock)(nil)
var _ clock.WithDelayedExecution = (*driftClock)(nil)

func newDriftClock() *driftClock {
	now := time.Now()
	return &driftClock{rate: 1, anchor: now, read: now}
}

// setRate changes the rate from now on.
func (c *driftClock) setRate(rate float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	c.read = c.read.Add(time.Duration(float64(now.Sub(c.anchor)) * c.rate))
	c.anchor, c.rate = now, rate
}

func (c *driftClock) getRate() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rate
}

// real converts a duration on this clock to simulated time.
func (c *driftClock) real(d time.Duration) time.Duration {
	return time.Duration(math.Round(float64(d) / c.getRate()))
}

func (c *driftClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read.Add(time.Duration(float64(time.Since(c.anchor)) * c.rate))
}

func (c *driftClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *driftClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }
func (c *driftClock) After(d time.Duration) <-chan time.Time {
	return time.After(c.real(d))
}
func (c *driftClock) Tick(d time.Duration) <-chan time.Time {
	if d <= 0 {
		return nil
	}
	return c.NewTicker(d).C()
}
func (c *driftClock) Sleep(d time.Duration) { time.Sleep(c.real(d)) }

func (c *driftClock) NewTimer(d time.Duration) clock.Timer {
	return &driftTimer{c: c, t: time.NewTimer(c.real(d))}
}

func (c *driftClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return &driftTimer{c: c, t: time.AfterFunc(c.real(d), f)}
}

func (c *driftClock) NewTicker(d time.Duration) clock.Ticker {
	return &driftTicker{t: time.NewTicker(c.real(d))}
}

type driftTimer struct {
	c *driftClock
	t *time.Timer
}

func (t *driftTimer) C() <-chan time.Time        { return t.t.C }
func (t *driftTimer) Stop() bool                 { return t.t.Stop() }
func (t *driftTimer) Reset(d time.Duration) bool { return t.t.Reset(t.c.real(d)) }

type driftTicker struct{ t *time.Ticker }

func (t *driftTicker) C() <-chan time.Time { return t.t.C }
func (t *driftTicker) Stop()               { t.t.Stop() }
