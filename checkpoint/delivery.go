package checkpoint

import (
	"context"
	"errors"
	"sync"

	"github.com/go-logr/logr"

	"github.com/reconkit/reconkit/backoff"
)

// errSuperseded ends the retry of a delivery that a newer delivery, or
// the host's own Assign, replaced.
var errSuperseded = errors.New("checkpoint: superseded by a newer assignment")

// deliveries passes what Config.Source delivers to Assign, for one Run. A
// delivery is tried at once, on the source's goroutine; one whose Assign
// failed in a way that can pass (the store) is retried with backoff on a
// goroutine of its own, so the source goes on, and the retry stops the
// moment anything newer is assigned. Refusals and invalid payloads are
// reported in the condition and not retried.
type deliveries[T any] struct {
	c    *Controller[T]
	wake chan struct{} // buffered 1: pending was set

	mu      sync.Mutex
	pending *redelivery        // the delivery to retry, nil if none
	stop    context.CancelFunc // ends the retry in progress
}

// redelivery is a delivery to retry.
type redelivery struct {
	payload []byte
	src     Source
	hash    string
	seq     uint64 // c.assignSeq it was delivered as
	err     error  // why its first try failed
}

func newDeliveries[T any](c *Controller[T]) *deliveries[T] {
	return &deliveries[T]{c: c, wake: make(chan struct{}, 1)}
}

// deliver is the assign function Source.Watch calls. It returns after one
// try: the source is never held up by a store that keeps failing.
func (d *deliveries[T]) deliver(ctx context.Context, payload []byte, src Source) {
	hash := HashPayload(payload)
	d.mu.Lock()
	if p := d.pending; p != nil && p.hash == hash && p.src == src {
		// Delivered again (a relist, a poll): the retry goes on at its
		// own pace.
		d.mu.Unlock()
		return
	}
	d.pending = nil
	if d.stop != nil {
		d.stop() // superseded: end the older one's wait at once
	}
	d.mu.Unlock()

	c := d.c
	c.mu.Lock()
	c.assignSeq++
	seq := c.assignSeq
	c.mu.Unlock()
	err := d.try(ctx, payload, src, seq)
	if err == nil || errors.Is(err, errSuperseded) || ctx.Err() != nil {
		return
	}
	if permanent(err) {
		if !errors.Is(err, ErrRejected) {
			logr.FromContextOrDiscard(ctx).Error(err, "assigning delivered configuration", "origin", src.Origin)
		}
		return
	}
	d.mu.Lock()
	d.pending = &redelivery{payload: payload, src: src, hash: hash, seq: seq, err: err}
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// try assigns a delivery unless something newer was assigned since.
func (d *deliveries[T]) try(ctx context.Context, payload []byte, src Source, seq uint64) error {
	c := d.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.assignSeq != seq {
		return errSuperseded
	}
	_, err := c.assign(ctx, payload, src)
	return err
}

// permanent reports whether a failed Assign would fail again the same way.
func permanent(err error) bool {
	return errors.Is(err, ErrRejected) || errors.Is(err, ErrInvalidConfig) || errors.Is(err, ErrInvalidID) ||
		errors.Is(err, ErrConflict) || errors.Is(err, ErrNotBootstrapped)
}

// run retries the pending delivery until it succeeds, fails for good, is
// superseded or ctx ends, and then waits for the next one. It returns when
// ctx ends.
func (d *deliveries[T]) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		}
		d.mu.Lock()
		p := d.pending
		rctx, stop := context.WithCancel(ctx)
		d.stop = stop
		d.mu.Unlock()
		if p != nil {
			d.retry(rctx, p)
		}
		stop()
		d.mu.Lock()
		if d.pending == p {
			d.pending = nil
		}
		d.mu.Unlock()
	}
}

// retry retries p with backoff; its first try, made by deliver, failed
// with p.err.
func (d *deliveries[T]) retry(ctx context.Context, p *redelivery) {
	first := true
	err := backoff.Retry(ctx, func(ctx context.Context) error {
		if first {
			first = false
			return p.err // the wait after the first try comes from its error
		}
		err := d.try(ctx, p.payload, p.src, p.seq)
		if err != nil && (permanent(err) || errors.Is(err, errSuperseded)) {
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithClock(d.c.clock), backoff.WithRand(d.c.rand.assign), backoff.WithName("checkpoint assign"))
	if err != nil && !errors.Is(err, ErrRejected) && !errors.Is(err, errSuperseded) && ctx.Err() == nil {
		logr.FromContextOrDiscard(ctx).Error(err, "assigning delivered configuration", "origin", p.src.Origin)
	}
}
