package checkpoint

import (
	"context"
	"fmt"

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
		d := newDeliveries(c)
		g.Go(func() error {
			d.run(ctx)
			return nil
		})
		g.Go(func() error {
			if err := c.cfg.Source.Watch(ctx, d.deliver); err != nil && ctx.Err() == nil {
				return fmt.Errorf("checkpoint: run: source: %w", err)
			}
			return nil
		})
	}
	g.Go(func() error {
		err := backoff.Every(ctx, c.cfg.CheckInterval, 0, c.check,
			backoff.WithClock(c.clock), backoff.WithRand(c.rand.check), backoff.WithName("checkpoint trial"))
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("checkpoint: run: trial checks: %w", err)
		}
		return nil
	})
	return g.Wait()
}
