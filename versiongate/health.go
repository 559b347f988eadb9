package versiongate

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// RecordCheckName is the name under which hosts conventionally serve
// RecordCheck.
const RecordCheckName = "releaseRecord"

// RecordCheck returns a health check, in the shape of controller-runtime's
// healthz.Checker, that fails with an error wrapping ErrRecordLost when
// the node's release record has not been valid for longer than grace:
// not yet published, or lost (no keep-alive acknowledged before its local
// deadline), so the leader may stop counting this node and Ready is false.
// Time is measured on Config.RecordClock from the first call of the check
// that found the record not valid, so a probe that runs every P fails
// between grace and grace+P after the loss; grace covers the start-up
// publication and, with RejoinAfterRecordLoss, the wait before a new
// record. A negative grace counts as zero.
//
// Where the host owns the records (Config.Decode set), the gate holds no
// record and the check always passes. The request is not used and may be
// nil; the check sends no request and is safe for concurrent use.
func (g *Gate) RecordCheck(grace time.Duration) func(*http.Request) error {
	grace = max(grace, 0)
	var mu sync.Mutex
	var invalidSince time.Time // zero while the record is valid
	return func(*http.Request) error {
		if g.cfg.Decode != nil {
			return nil
		}
		st, _ := g.record.Load()
		mu.Lock()
		defer mu.Unlock()
		if g.recordValid(st) {
			invalidSince = time.Time{}
			return nil
		}
		now := g.recordClock.Now()
		if invalidSince.IsZero() {
			invalidSince = now
		}
		if d := now.Sub(invalidSince); d > grace {
			what := "lost"
			if st.rev == 0 {
				what = "not published"
			}
			return fmt.Errorf("%w: the record of node %q is %s, not valid for %v (grace %v)", ErrRecordLost, g.cfg.NodeID, what, d, grace)
		}
		return nil
	}
}
