package nodestatus

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/backoff"
)

// Retry settings for API calls: like the kubelet's lease controller, start
// fast; unlike its 7s cap (8.4s with jitter), no wait is longer than
// retryMaxWait, jitter included, so that after an outage heals the next
// attempt comes within it.
const (
	retryInitial = 200 * time.Millisecond
	retryJitter  = 0.2 // the backoff package's default: ±20%
	retryMaxWait = 5 * time.Second
	// retryMaxInterval is the backoff cap before jitter.
	retryMaxInterval = retryMaxWait * 5 / 6 // (1 + retryJitter) = 6/5
	// retryFirstMax is the longest first retry wait, jitter included.
	retryFirstMax = time.Duration(float64(retryInitial) * (1 + retryJitter))
)

func permanent(err error) error { return backoff.Permanent(err) }

// retry runs op with backoff until it succeeds or returns a permanent
// error. Failed requests have already been shown to the metrics hook and
// the error handler (see observe). A 429's Retry-After is honoured up to
// retryMaxWait.
func (c *NodeController) retry(ctx context.Context, kind int, op func(context.Context) error) error {
	waiting := false // for the next attempt: not working
	defer func() {
		if waiting {
			c.jobs.resume(kind)
		}
	}()
	return backoff.Retry(ctx, func(ctx context.Context) error {
		if waiting {
			waiting = false
			c.jobs.resume(kind)
		}
		err := op(ctx)
		if err != nil && !backoff.IsPermanent(err) {
			waiting = true
			c.jobs.wait(kind)
		}
		if secs, ok := apierrors.SuggestsClientDelay(err); ok && apierrors.IsTooManyRequests(err) && !backoff.IsPermanent(err) {
			return backoff.RetryAfter(err, time.Duration(secs)*time.Second)
		}
		return err
	},
		backoff.WithClock(retryClock{Clock: c.clk, jobs: &c.jobs, kind: kind}),
		backoff.WithInitialInterval(retryInitial),
		backoff.WithJitter(retryJitter),
		backoff.WithRand(c.rand.retry[kind]),
		backoff.WithMaxInterval(retryMaxInterval),
		backoff.WithMaxRetryAfter(retryMaxWait),
		backoff.WithName("nodestatus "+[...]string{"lease", "status"}[kind]),
	)
}

// What a retry is for.
const (
	retryLease = iota
	retryStatus
)

// retryClock is the clock of one retry: it records when each wait ends.
type retryClock struct {
	clock.Clock
	jobs *jobState
	kind int
}

// NewTimer arms the retry's timer, then records when it fires. Until then
// the job counts as due at once (jobState.wait), so a test that advances a
// fake clock only while the controller is idle cannot advance it between
// the two: the instant recorded is the timer's. In the other order, a step
// in between armed the timer a step late, past the instant recorded, and
// the controller looked busy, with a retry overdue, until a step that
// never came.
func (k retryClock) NewTimer(d time.Duration) clock.Timer {
	t := k.Clock.NewTimer(d)
	k.jobs.waitUntil(k.kind, k.Now().Add(d))
	return t
}

// jobState tells whether lease and status jobs are at work, or waiting
// for a retry, and until when.
type jobState struct {
	mu      sync.Mutex
	working int          // jobs started and not waiting for a retry
	due     [2]time.Time // when each kind's retry wait ends
	waiting [2]bool      // each kind waits for a retry
}

func (j *jobState) start() { j.mu.Lock(); j.working++; j.mu.Unlock() }

func (j *jobState) done() { j.mu.Lock(); j.working--; j.mu.Unlock() }

// wait records that a job of kind waits for a retry, due at once until
// waitUntil says when its wait ends.
func (j *jobState) wait(kind int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.working--
	j.waiting[kind], j.due[kind] = true, time.Time{}
}

func (j *jobState) waitUntil(kind int, t time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.due[kind] = t
}

func (j *jobState) resume(kind int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.working++
	j.waiting[kind] = false
}

// idle reports whether no job is at work and no retry wait is due at now.
func (j *jobState) idle(now time.Time) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.working > 0 {
		return false
	}
	for k := range j.waiting {
		if j.waiting[k] && !j.due[k].After(now) {
			return false
		}
	}
	return true
}
