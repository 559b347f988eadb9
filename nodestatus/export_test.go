package nodestatus

import (
	"fmt"
	"time"
)

// EnableProbe lets Quiet ask c's loop about its state; call it before Run.
func EnableProbe(c *NodeController) { c.probe = make(chan chan bool) }

// Quiet reports whether c's loop, between two events, has nothing to do
// until one of its timers fires (see runner.quiet). It is false while Run
// has not started its loop or has returned, or if the loop does not answer
// within wait.
func Quiet(c *NodeController, wait time.Duration) bool {
	reply := make(chan bool, 1)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case c.probe <- reply:
	case <-c.done:
		return false
	case <-t.C:
		return false
	}
	select {
	case q := <-reply: // the loop answers as it takes the probe
		return q
	case <-t.C:
		return false
	}
}

// State describes what Quiet reports on, for a test's failure message.
func State(c *NodeController) string {
	j := &c.jobs
	j.mu.Lock()
	defer j.mu.Unlock()
	return fmt.Sprint("jobs at work: ", j.working, ", waiting for a retry (lease, status): ", j.waiting, " until ", j.due, ", now ", c.clk.Now(), ", notifications: ", len(c.notify))
}
