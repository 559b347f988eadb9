package lease_test

import (
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

// The harness of the real-server renewal tests (renew_real_test.go): a
// fake clock stepped from one armed timer to the next, and a transport
// that counts the elector's requests on that clock.

// stepClock is a fake clock that knows, for each of its timers, the
// instant it is armed for and how often it was armed, so that a test can
// step it from one timer to the next and wait until the timer's owner has
// armed it again.
type stepClock struct {
	*testingclock.FakeClock
	mu     sync.Mutex // held across the fake's calls, so no step comes between a timer's arming and its record
	timers []*stepTimer
	armed  chan struct{} // receives (without blocking) after every arming
}

func newStepClock(t time.Time) *stepClock {
	return &stepClock{FakeClock: testingclock.NewFakeClock(t), armed: make(chan struct{}, 1)}
}

type stepTimer struct {
	clock.Timer
	c      *stepClock
	at     time.Time // the instant it is armed for
	active bool      // armed, neither fired nor stopped
	arms   int       // times it was armed
}

// NewTimer implements clock.Clock.
func (c *stepClock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	st := &stepTimer{Timer: c.FakeClock.NewTimer(d), c: c, at: c.FakeClock.Now().Add(d), active: true, arms: 1}
	c.timers = append(c.timers, st)
	c.mu.Unlock()
	c.notify()
	return st
}

func (c *stepClock) notify() {
	select {
	case c.armed <- struct{}{}:
	default:
	}
}

// Reset implements clock.Timer.
func (t *stepTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	was := t.Timer.Reset(d)
	t.at, t.active = t.c.FakeClock.Now().Add(d), true
	t.arms++
	t.c.mu.Unlock()
	t.c.notify()
	return was
}

// Stop implements clock.Timer.
func (t *stepTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.active = false
	return t.Timer.Stop()
}

// next returns the earliest instant a live timer is armed for.
func (c *stepClock) next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var at time.Time
	found := false
	for _, t := range c.timers {
		if t.active && (!found || t.at.Before(at)) {
			at, found = t.at, true
		}
	}
	return at, found
}

// armedAt reports whether a live timer is armed for the instant at.
func (c *stepClock) armedAt(at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.timers {
		if t.active && t.at.Equal(at) {
			return true
		}
	}
	return false
}

// fire sets the clock to at and returns the timers that fired, each with
// the number of times it had been armed.
func (c *stepClock) fire(at time.Time) map[*stepTimer]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	fired := map[*stepTimer]int{}
	for _, t := range c.timers {
		if t.active && !t.at.After(at) {
			t.active = false
			fired[t] = t.arms
		}
	}
	c.FakeClock.SetTime(at)
	return fired
}

// rearmed reports whether every timer of fired was armed again since.
func (c *stepClock) rearmed(fired map[*stepTimer]int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for t, n := range fired {
		if t.arms == n {
			return false
		}
	}
	return true
}

// wireRequest is one request the elector sent: when (on its clock, from
// the fault's start), what, and the status code the server answered.
type wireRequest struct {
	at     time.Duration
	method string
	code   int // 0 when no answer came
}

// wire counts the elector's requests at the transport, and runs before,
// if set, ahead of every update of the Lease.
type wire struct {
	clk *stepClock

	mu     sync.Mutex
	start  time.Time
	reqs   []wireRequest
	before func(*http.Request) error
	errs   []error
}

func (w *wire) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		w.mu.Lock()
		if len(w.reqs) >= wireCap {
			// A loop that spins: park it until its term ends, so that the
			// test ends and reports the count.
			w.mu.Unlock()
			<-req.Context().Done()
			return nil, req.Context().Err()
		}
		i := len(w.reqs)
		w.reqs = append(w.reqs, wireRequest{at: w.clk.Now().Sub(w.start), method: req.Method})
		before := w.before
		w.mu.Unlock()
		if before != nil && req.Method == http.MethodPut {
			if err := before(req); err != nil {
				w.mu.Lock()
				w.errs = append(w.errs, err)
				w.mu.Unlock()
			}
		}
		resp, err := rt.RoundTrip(req)
		if err == nil {
			w.mu.Lock()
			w.reqs[i].code = resp.StatusCode
			w.mu.Unlock()
		}
		return resp, err
	})
}

// wireCap bounds the requests one test lets through.
const wireCap = 2000

// maxSteps bounds the clock steps of one term: a fixed RetryPeriod of
// 500 ms takes 100 in a 50 s term, the backoff a dozen, and a loop that
// re-arms its timer for the instant it fired at takes one per renewal.
const maxSteps = 300

// from starts counting afresh, request instants from start.
func (w *wire) from(start time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.start, w.reqs = start, nil
}

func (w *wire) snapshot() []wireRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]wireRequest(nil), w.reqs...)
}

func (w *wire) setBefore(f func(*http.Request) error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.before = f
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
