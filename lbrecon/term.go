package lbrecon

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"

	"github.com/reconkit/reconkit/backoff"
)

// Terms: a reconciler kept across leadership terms begins each one with
// its fence, then drops the earlier term's memory and reads the journal
// again. Tests: term_test.go.

// beginTerm begins the term of the fencing token ctx carries (see
// [WithToken]) when the reconciler is not in it yet: it raises the fence
// to the token first ([Config.Admit]), so that every write of an earlier
// term, this process's or another's, is refused from then on; then, when
// an earlier term's memory is there, it drops it and marks the journal to
// be read again, so that what the reconciler reads next is read after the
// fence went up. A context without a token begins nothing. A refusal of
// Admit leaves the reconciler in the term it was in and is the call's
// error, never retried. It runs before any listing or journal read of a call.
func (r *Reconciler) beginTerm(ctx context.Context) error {
	token, ok := TokenFrom(ctx)
	if !ok {
		return nil
	}
	r.termMu.Lock()
	defer r.termMu.Unlock()
	if r.inTerm && token == r.term {
		return nil
	}
	if r.cfg.Admit != nil {
		if err := r.cfg.Admit(token); err != nil {
			// Permanent, as CheckToken's refusals: a stale token does
			// not get fresher.
			return backoff.Permanent(fmt.Errorf("lbrecon: begin the term of token %d: raise the fence: %w", token, err))
		}
	}
	if r.inTerm {
		// What the earlier term kept may be out of date: another
		// leader's term may have created, changed or destroyed objects
		// and recorded creations in the journal since.
		r.journalMu.Lock()
		r.memMu.Lock()
		r.mem = newMemory()
		r.journalLoaded = false
		r.memMu.Unlock()
		r.journalMu.Unlock()
		r.termHorizon = r.horizonAfter(r.clock.Now())
		logr.FromContextOrDiscard(ctx).Info("new leadership term: the earlier term's memory is dropped and the journal read again",
			"scope", r.cfg.Scope, "token", token, "earlierToken", r.term)
	}
	r.term, r.inTerm = token, true
	return nil
}

// sinceTerm returns the horizon of the current term's beginning: the
// first listing that shows what earlier terms did. It is the zero horizon
// while the reconciler is in its first term.
func (r *Reconciler) sinceTerm() horizon {
	r.termMu.Lock()
	defer r.termMu.Unlock()
	return r.termHorizon
}
