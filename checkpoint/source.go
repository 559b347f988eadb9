package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/backoff"
)

// ConfigSource delivers assigned configuration to a [Controller]. Run calls
// Watch once, from a goroutine of its own; Watch calls assign with the
// current payload and with every change, one call at a time, until ctx
// ends, and then returns nil (or an error for a failure it cannot retry).
// assign returns once the Controller has tried the payload once (one that
// failed on the store is retried in the background until something newer
// comes, so assign never blocks behind a failing store). A source
// that finds nothing assigned delivers nothing; errors it can retry it logs
// and retries. Package configmapsource watches a Kubernetes ConfigMap;
// [PollSource] adapts a fetch function.
type ConfigSource interface {
	Watch(ctx context.Context, assign func(ctx context.Context, payload []byte, src Source)) error
}

// DefaultPollInterval is PollSource's interval when Interval is 0.
const DefaultPollInterval = 30 * time.Second

// pollMaxWait caps PollSource's backoff after failed fetches when
// Interval is shorter.
const pollMaxWait = 30 * time.Second

// PollSource is a [ConfigSource] that calls Fetch every Interval (plus up
// to 10% jitter) and delivers what it returns. Fetch returns an error
// wrapping [ErrNotFound] when nothing is assigned. Polling costs one
// request per interval per node; prefer a watch where the origin has one.
//
// A Fetch that fails is retried with backoff ([backoff.WithFailureBackoff]):
// the first wait is 1.5 × Interval and each further one half as long
// again, with ±20% jitter (never shorter than Interval), up to the larger
// of 1.5 × Interval and 30 s, so that an origin that fails for good costs at most one request
// per 24 s however short Interval is
// (TestPollSourceBacksOffPersistentErrors). The first success returns to
// Interval.
type PollSource struct {
	// Fetch reads the assigned payload. Required.
	Fetch func(ctx context.Context) ([]byte, Source, error)
	// Interval is the polling period; 0 means DefaultPollInterval.
	Interval time.Duration
	// Clock is the time source; nil means the real clock.
	Clock clock.Clock
	// Rand draws the jitter of the polling period and of the failure
	// backoff, uniformly in [0, 1); nil means math/rand/v2's Float64.
	// Watch calls it from its caller's goroutine only.
	Rand func() float64
}

var _ ConfigSource = (*PollSource)(nil)

// Watch implements [ConfigSource]. Fetch errors are logged, rate-limited,
// and polling goes on.
func (p *PollSource) Watch(ctx context.Context, assign func(context.Context, []byte, Source)) error {
	if p.Fetch == nil {
		return errors.New("checkpoint: PollSource.Fetch is required")
	}
	interval := p.Interval
	if interval == 0 {
		interval = DefaultPollInterval
	}
	clk := p.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	fetch := func(ctx context.Context) error {
		payload, src, err := p.Fetch(ctx)
		if errors.Is(err, ErrNotFound) {
			logr.FromContextOrDiscard(ctx).V(1).Info("nothing assigned", "detail", err.Error())
			return nil
		}
		if err != nil {
			return fmt.Errorf("fetch configuration: %w", err)
		}
		assign(ctx, payload, src)
		return nil
	}
	err := backoff.Every(ctx, interval, 0.1, fetch, backoff.WithClock(clk), backoff.WithRand(p.Rand), backoff.WithName("checkpoint poll source"),
		backoff.WithFailureBackoff(max(interval*3/2, pollMaxWait)))
	return err // nil when ctx ends, as Every returns
}
