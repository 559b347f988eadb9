package checkpoint

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"

	"github.com/reconkit/reconkit/backoff"
)

// Run checks trials every CheckInterval (on backoff.Every), watches Source
// if set, and delivers statuses to OnStatus. It blocks until ctx ends and every
// goroutine it started has returned, then returns nil, as
// controller-runtime's manager does. It returns an error only for a real
// failure: Bootstrap was not called ([ErrNotBootstrapped]), Run is already
// running ([ErrRunning]), or the Source failed in a way it cannot retry
// (Run then stops its other goroutines and returns the wrapped error).
func (c *Controller[T]) Run(ctx context.Context) error {
	c.mu.Lock()
	switch {
	case !c.bootstrapped:
		c.mu.Unlock()
		return ErrNotBootstrapped
	case c.running:
		c.mu.Unlock()
		return ErrRunning
	}
	c.running = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running = false
		c.mu.Unlock()
	}()

	g, ctx := errgroup.WithContext(ctx)
	if c.cfg.OnStatus != nil {
		w := c.statuses.Watch()
		g.Go(func() error {
			defer w.Close()
			for {
				st, err := w.Get(ctx)
				if err != nil {
					return nil // ctx ended
				}
				c.cfg.OnStatus(st)
			}
		})
	}
	if c.cfg.Source != nil {
		g.Go(func() error {
			if err := c.cfg.Source.Watch(ctx, c.deliver); err != nil && ctx.Err() == nil {
				return fmt.Errorf("checkpoint: run: source: %w", err)
			}
			return nil
		})
	}
	g.Go(func() error {
		err := backoff.Every(ctx, c.cfg.CheckInterval, 0, c.check,
			backoff.WithClock(c.clock), backoff.WithName("checkpoint trial"))
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("checkpoint: run: trial checks: %w", err)
		}
		return nil
	})
	return g.Wait()
}

// deliver assigns what the source delivers. Refusals and invalid payloads
// are reported in the condition and not retried; other failures (the
// store) are retried with backoff until they succeed, a newer delivery is
// due or ctx ends, so a delivered assignment is not lost to a passing
// store error.
func (c *Controller[T]) deliver(ctx context.Context, payload []byte, src Source) {
	err := backoff.Retry(ctx, func(ctx context.Context) error {
		_, err := c.Assign(ctx, payload, src)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrRejected), errors.Is(err, ErrInvalidConfig), errors.Is(err, ErrInvalidID), errors.Is(err, ErrConflict):
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithClock(c.clock), backoff.WithName("checkpoint assign"))
	if err != nil && !errors.Is(err, ErrRejected) && ctx.Err() == nil {
		logr.FromContextOrDiscard(ctx).Error(err, "assigning delivered configuration", "origin", src.Origin)
	}
}
