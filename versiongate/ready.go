package versiongate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	"github.com/reconkit/reconkit/backoff"
)

// WaitReady blocks until the stored status lets the local node serve:
// the local release is at least the status' minimum compatible release and
// the status' version is at least MinimumReconcilerRelease (see the
// function Ready). A
// WORKING status does not block. An absent or corrupt status does: the
// first leader writes a status only after its initial reconcile. It logs
// why it waits, once each time the reason changes. A failed read, or a
// watch that ended, is retried after a pause that doubles from 100ms to
// 10s, with jitter (see the package doc).
//
// When the gate owns the node records, WaitReady first waits until Run has
// published the local record, and reads the status after it: a leader that
// restricts the status after that either sees this node or fails its
// guarded write. If the record is lost while WaitReady waits (see
// ErrRecordLost), it returns an error wrapping ErrRecordLost at once; a
// later WaitReady waits for the record to be published again. On success
// Ready reports true until the record is lost. It returns ctx.Err() when
// ctx ends.
func (g *Gate) WaitReady(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	if g.cfg.Decode == nil {
		// rctx ends, with a cause wrapping ErrRecordLost, when the record
		// is lost.
		rctx, waited, stop, err := g.waitRecord(ctx)
		if err != nil {
			return err
		}
		defer stop()
		if err := g.waitStatus(rctx, log, nil); err != nil {
			if cause := context.Cause(rctx); errors.Is(cause, ErrRecordLost) {
				return cause
			}
			return err
		}
		// Ready only if the record is still the valid one it waited on
		// (stillWaited): the status was read while that record stood,
		// and a leader that restricted after that read saw that record
		// or none. setRecordInvalid clears ready after marking the record lost, so
		// a loss racing with this store is never missed; and Ready holds
		// only while the record is at the revision waited on (readyRev),
		// so it is not true even for a moment on a record published
		// since.
		g.readyRev.Store(waited.rev)
		g.ready.Store(true)
		if g.afterReady != nil {
			g.afterReady()
		}
		if !g.stillWaited(rctx, waited) {
			g.ready.Store(false)
			return fmt.Errorf("%w: lost while the status was read", ErrRecordLost)
		}
		return nil
	}
	if err := g.waitStatus(ctx, log, nil); err != nil {
		return err
	}
	g.ready.Store(true)
	return nil
}

// stillWaited reports whether the local record is still the valid one a
// readiness wait waited on (waited, from waitRecord) and rctx, the
// context waitRecord returned, has not ended for its loss. Both
// WaitReady and the readiness condition check it after a status read
// that admits this node: a read answered before a loss and returned after
// the next record was published (a goroutine starved for a TTL) is no
// proof for that next record, whose publish the leader may not have seen;
// and the record's watcher may not have ended rctx yet, or may skip the
// loss when both land between two of its reads, so the revision is
// compared too.
func (g *Gate) stillWaited(rctx context.Context, waited recordState) bool {
	st, _ := g.record.Load()
	return g.recordValid(st) && st.rev == waited.rev && !errors.Is(context.Cause(rctx), ErrRecordLost)
}

// waitRecord waits until the local record is valid and returns a context
// that ends, with a cause wrapping ErrRecordLost, when it stops being so,
// the record's state it waited for, and a stop function that ends that
// context and waits for the goroutine that follows the record.
func (g *Gate) waitRecord(ctx context.Context) (context.Context, recordState, func(), error) {
	w := g.record.Watch()
	var waited recordState
	for {
		st, err := w.Get(ctx)
		if err != nil {
			w.Close()
			return nil, recordState{}, nil, err
		}
		if st.valid {
			waited = st
			break
		}
	}
	rctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer w.Close()
		for {
			if g.beforeRecordRead != nil {
				g.beforeRecordRead()
			}
			st, err := w.Get(rctx)
			if err != nil {
				return
			}
			if !st.valid || st.rev != waited.rev {
				// Lost, or lost and published again between two reads.
				cancel(fmt.Errorf("%w: while waiting for a status that admits this node", ErrRecordLost))
				return
			}
		}
	}()
	return rctx, waited, func() { cancel(nil); <-done }, nil
}

// waitStatus blocks until the stored status lets the local node serve.
// onWait, if not nil, receives the condition reason and the message each
// time the reason to wait changes.
func (g *Gate) waitStatus(ctx context.Context, log logr.Logger, onWait func(reason, message string)) error {
	var lastReason string
	admits := func(stored StoredStatus) bool {
		var reason string
		cond := ReasonStatusNotAdmitting
		if !stored.exists() {
			cond = ReasonStatusPending
			reason = "no status yet: the initial reconcile has not finished"
		} else if st, err := stored.decode(); err != nil {
			g.setStatusError(err)
			cond = ReasonStatusCorrupt
			reason = "status is corrupt: " + err.Error()
		} else {
			g.setStatusError(nil)
			var ok bool
			if ok, reason = Ready(st, g.cfg.Version.Release, g.cfg.MinimumReconcilerRelease); ok {
				log.Info("Ready to serve", "status", st.String(), "release", g.cfg.Version.Release.String())
				return true
			}
			reason = fmt.Sprintf("%s (status: %s)", reason, st)
		}
		if reason != lastReason {
			lastReason = reason
			log.Info("Not ready, waiting for a status change", "reason", reason)
			if onWait != nil {
				onWait(cond, reason)
			}
		}
		return false
	}

	// Each attempt reads the status and, if it does not admit this node
	// yet, watches it from the read's revision. A failed read, or a watch
	// that ended (an EOF, a store that returns nil, a 410 from a server
	// that restarted), fails the attempt: the next comes after a pause,
	// and a watch that keeps ending so leads to fewer and fewer reads. An
	// attempt whose watch lasted readRetryReset succeeds without the node
	// being ready, and the sequence starts again.
	st := g.cfg.Store
	for {
		var ready bool
		err := backoff.Retry(ctx, func(ctx context.Context) error {
			cur, err := st.ReadStatus(ctx)
			if err != nil {
				log.V(1).Info("Could not read status, retrying", "err", err.Error())
				return fmt.Errorf("read status: %w", err)
			}
			if ready = admits(cur); ready {
				return nil
			}
			began := g.clock.Now()
			err = st.WatchStatus(ctx, cur.Revision, func(s StoredStatus) bool {
				ready = admits(s)
				return ready
			})
			if ready || ctx.Err() != nil {
				return nil
			}
			log.V(1).Info("Status watch ended, reading status again", "reason", fmt.Sprint(err))
			if g.clock.Since(began) >= readRetryReset {
				return nil
			}
			if err == nil {
				err = errWatchEnded
			}
			return fmt.Errorf("watch status from revision %d: %w", cur.Revision, err)
		}, backoff.WithClock(g.clock), backoff.WithRand(g.rand.ready), backoff.WithName("versiongate: wait for an admitting status"),
			backoff.WithInitialInterval(readRetryBase), backoff.WithMaxInterval(readRetryMax),
			backoff.WithMultiplier(readRetryMultiplier), backoff.WithJitter(readRetryJitter))
		if ready {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return err
		}
	}
}

// errWatchEnded fails a readiness attempt whose status watch ended
// without an error.
var errWatchEnded = errors.New("the watch ended")

// Retries of the readiness wait's read and watch (backoff.Retry):
// readRetryBase doubling up to readRetryMax, each pause drawn from [½, 1½]
// of that, so that the nodes an apiserver restart turned away together
// come back apart. A watch that lasted readRetryReset starts the sequence
// again. After 30s of one failure a node sends at most two requests (a
// read and a watch) per 5s (TestReadinessRetriesBackOff,
// TestStatusWatchEndingAtOnceBacksOff).
const (
	readRetryBase       = 100 * time.Millisecond
	readRetryMax        = 10 * time.Second
	readRetryMultiplier = 2
	readRetryJitter     = 0.5
	readRetryReset      = time.Minute
)
