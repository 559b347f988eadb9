package electiontest

import (
	"context"
	"fmt"

	"github.com/reconkit/reconkit/election"
)

// LeadingReporter is the cheap leader state that etcd.Elector and
// lease.Elector (packages election/etcd and election/lease) and Candidate
// offer: Leading without a request, and
// a channel closed at the next change.
type LeadingReporter interface {
	Leading() bool
	LeadingChanged() <-chan struct{}
}

var _ LeadingReporter = (*Candidate)(nil)

// WaitLeading blocks until e reports Leading, without polling, or until
// ctx ends; then it returns an error wrapping ctx's cause. Give ctx a
// generous deadline: the wait ends as soon as the state changes.
func WaitLeading(ctx context.Context, e LeadingReporter) error {
	return waitLeading(ctx, e, true)
}

// WaitNotLeading blocks until e reports that it does not lead, or until
// ctx ends, as WaitLeading.
func WaitNotLeading(ctx context.Context, e LeadingReporter) error {
	return waitLeading(ctx, e, false)
}

func waitLeading(ctx context.Context, e LeadingReporter, want bool) error {
	for {
		changed := e.LeadingChanged() // before reading, so no change is missed
		if e.Leading() == want {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("electiontest: waiting for Leading() == %v: %w", want, context.Cause(ctx))
		}
	}
}

// WaitLeader follows e's Observe stream until it reports identity as the
// leader ("" waits for "no leader") and returns that state, or returns an
// error wrapping ctx's cause when ctx ends first, with the last state seen.
func WaitLeader(ctx context.Context, e election.Elector, identity string) (election.LeaderInfo, error) {
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := e.Observe(octx)
	defer func() {
		cancel()
		for range ch { // Observe closes the channel once its goroutines ended
		}
	}()
	var last election.LeaderInfo
	seen := false
	for {
		select {
		case info, ok := <-ch:
			if !ok {
				return last, fmt.Errorf("electiontest: Observe ended while waiting for leader %q: %w", identity, context.Cause(ctx))
			}
			if info.Identity == identity {
				return info, nil
			}
			last, seen = info, true
		case <-ctx.Done():
			if !seen {
				return last, fmt.Errorf("electiontest: waiting for leader %q, nothing observed: %w", identity, context.Cause(ctx))
			}
			return last, fmt.Errorf("electiontest: waiting for leader %q, last seen %+v: %w", identity, last, context.Cause(ctx))
		}
	}
}

// WaitTermEnded blocks until l's term context ends and returns its cause,
// or returns an error wrapping ctx's cause when ctx ends first.
func WaitTermEnded(ctx context.Context, l election.Leadership) (cause, err error) {
	select {
	case <-l.Context().Done():
		return context.Cause(l.Context()), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("electiontest: waiting for term %d of %s to end: %w", l.Token(), l.Identity(), context.Cause(ctx))
	}
}
