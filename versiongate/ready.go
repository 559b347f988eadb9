package versiongate

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
)

// WaitReady blocks until the stored status lets the local node serve:
// the local release is at least the status' minimum compatible release and
// the status' version is at least MinimumReconcilerRelease (see the
// function Ready). A
// WORKING status does not block. An absent or corrupt status does: the
// first leader writes a status only after its initial reconcile. It logs
// why it waits, once each time the reason changes.
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
		rctx, stop, err := g.waitRecord(ctx)
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
		// Ready only if the record is still the valid one it waited on;
		// setRecordInvalid clears ready after marking the record lost, so
		// a loss racing with this store is never missed.
		g.ready.Store(true)
		if st, _ := g.record.Load(); !g.recordValid(st) {
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

// waitRecord waits until the local record is valid and returns a context
// that ends, with a cause wrapping ErrRecordLost, when it stops being so,
// and a stop function that ends that context and waits for the goroutine
// that follows the record.
func (g *Gate) waitRecord(ctx context.Context) (context.Context, func(), error) {
	w := g.record.Watch()
	for {
		st, err := w.Get(ctx)
		if err != nil {
			w.Close()
			return nil, nil, err
		}
		if st.valid {
			break
		}
	}
	rctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer w.Close()
		for {
			st, err := w.Get(rctx)
			if err != nil {
				return
			}
			if !st.valid {
				cancel(fmt.Errorf("%w: while waiting for a status that admits this node", ErrRecordLost))
				return
			}
		}
	}()
	return rctx, func() { cancel(nil); <-done }, nil
}

// waitStatus blocks until the stored status lets the local node serve.
// onWait, if not nil, receives the condition reason and the message each
// time the reason to wait changes.
func (g *Gate) waitStatus(ctx context.Context, log logr.Logger, onWait func(reason, message string)) error {
	var lastReason string
	ready := func(value []byte, exists bool) bool {
		var reason string
		cond := ReasonStatusNotAdmitting
		if !exists {
			cond = ReasonStatusPending
			reason = "no status yet: the initial reconcile has not finished"
		} else if st, err := DecodeStatus(value); err != nil {
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

	st := g.cfg.Store
	for {
		cur, err := st.ReadStatus(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			log.Info("Could not read status, retrying", "err", err.Error())
			if err := g.pause(ctx); err != nil {
				return err
			}
			continue
		}
		if ready(cur.Value, cur.Value != nil) {
			return nil
		}
		var ok bool
		err = st.WatchStatus(ctx, cur.Revision, func(s StoredStatus) bool {
			ok = ready(s.Value, s.Value != nil)
			return ok
		})
		if ok {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// A watch that ends at once (an EOF, a store that returns nil)
		// must not make a read loop.
		log.Info("Status watch ended, reading status again", "reason", fmt.Sprint(err))
		if err := g.pause(ctx); err != nil {
			return err
		}
	}
}

// pause waits a short, fixed time on the gate's clock before a read is
// retried.
func (g *Gate) pause(ctx context.Context) error {
	select {
	case <-g.clock.After(pauseBase):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
