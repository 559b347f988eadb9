package nodestatus

import (
	"fmt"
	"time"
)

// EnableProbe lets Probe ask c's loop about its state; call it before Run.
func EnableProbe(c *NodeController) { c.probe = make(chan chan probeReply) }

// Probe asks c's loop, between two events, whether it has nothing to do
// until one of its timers fires (see runner.quiet), and whether a ping it
// started has not been handled yet: its provider's Ping may still be
// running, whether it hangs or its goroutine was not yet run to its end.
// ok is false while Run has not started its loop or has returned, or if
// the loop does not answer within wait.
func Probe(c *NodeController, wait time.Duration) (quiet, pinging, ok bool) {
	reply := make(chan probeReply, 1)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case c.probe <- reply:
	case <-c.done:
		return false, false, false
	case <-t.C:
		return false, false, false
	}
	select {
	case r := <-reply: // the loop answers as it takes the probe
		return r.quiet, r.pinging, true
	case <-t.C:
		return false, false, false
	}
}

// State describes what Probe reports on, for a test's failure message.
func State(c *NodeController) string {
	j := &c.jobs
	j.mu.Lock()
	defer j.mu.Unlock()
	return fmt.Sprint("jobs at work: ", j.working, ", waiting for a retry (lease, status): ", j.waiting, " until ", j.due, ", now ", c.clk.Now(), ", notifications: ", len(c.notify))
}
