package nodestatus

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// ErrHeartbeatStale is wrapped by the error of a HeartbeatCheck whose
// controller has not heartbeated within its bound, or whose Run has
// returned.
var ErrHeartbeatStale = errors.New("nodestatus: heartbeat stale")

// HeartbeatCheckName is the name under which hosts conventionally serve
// HeartbeatCheck.
const HeartbeatCheckName = "nodeHeartbeat"

// LastHeartbeat returns when the last heartbeat succeeded (a lease
// renewal, or a status write when heartbeats are status writes), on the
// controller's clock, and false before the first. It sends no request.
func (c *NodeController) LastHeartbeat() (time.Time, bool) {
	if t := c.lastBeat.Load(); t != nil {
		return *t, true
	}
	return time.Time{}, false
}

// HeartbeatCheck returns a health check, in the shape of
// controller-runtime's healthz.Checker, that fails with an error wrapping
// ErrHeartbeatStale when no heartbeat has succeeded within bound: the
// Node's Lease (or, without leases, its status) is not being renewed, and
// the node lifecycle controller will mark the Node NotReady (Unknown) and
// taint it unreachable. bound <= 0 means Config.LeaseDuration, the time
// the lease promises. Time is measured on the controller's clock from the
// last successful heartbeat, or, before the first, from when Run started
// (or this check was made, if later): a starting controller gets one
// bound to register and heartbeat. Once Run has returned, the check fails.
//
// It also fails while PingFailureStopHeartbeat holds the heartbeat back
// on purpose, and while the API server is unreachable: a restart helps in
// neither case, so serve it for operators and readiness rather than as a
// liveness probe that restarts the process, or give that probe a bound
// and failure threshold well above an API outage you want to ride out.
// The request is not used and may be nil; the check sends no request and
// is safe for concurrent use.
func (c *NodeController) HeartbeatCheck(bound time.Duration) func(*http.Request) error {
	if bound <= 0 {
		bound = c.cfg.LeaseDuration
	}
	created := c.clk.Now()
	return func(*http.Request) error {
		select {
		case <-c.done:
			return fmt.Errorf("%w: Run has returned", ErrHeartbeatStale)
		default:
		}
		now := c.clk.Now()
		if last, ok := c.LastHeartbeat(); ok {
			if age := now.Sub(last); age > bound {
				return fmt.Errorf("%w: node %q last heartbeat %v ago (bound %v)", ErrHeartbeatStale, c.name, age.Round(time.Millisecond), bound)
			}
			return nil
		}
		from := created
		if s := c.runStart.Load(); s != nil && s.After(from) {
			from = *s
		}
		if wait := now.Sub(from); wait > bound {
			if c.runStart.Load() == nil {
				return fmt.Errorf("%w: node %q: Run has not started (%v, bound %v)", ErrHeartbeatStale, c.name, wait.Round(time.Millisecond), bound)
			}
			return fmt.Errorf("%w: node %q: no heartbeat yet, %v after Run started (bound %v)", ErrHeartbeatStale, c.name, wait.Round(time.Millisecond), bound)
		}
		return nil
	}
}
