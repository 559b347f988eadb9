package lbrecontest

import (
	"errors"
	"fmt"
	"time"

	"github.com/reconkit/reconkit/lbrecon"
)

// ErrInjected is wrapped by the errors of injected faults.
var ErrInjected = errors.New("lbrecontest: injected fault")

// ErrCrashed is wrapped by Create when a [Engine.CrashBeforeTag] fault made
// it create the object without its tags.
var ErrCrashed = errors.New("lbrecontest: crashed between create and tag")

// RateLimitError is returned by rate-limited calls. Its RetryAfter method is
// the hint the reconciler honours (0 means the provider gave none).
type RateLimitError struct{ After time.Duration }

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("lbrecontest: 429 rate limited, retry after %v", e.After)
}

// RetryAfter returns how long to wait before the next call.
func (e *RateLimitError) RetryAfter() time.Duration { return e.After }

type fault struct {
	verb  lbrecon.Verb
	match func(lbrecon.Object) bool
	left  int // <0: forever
	apply func(*Engine, lbrecon.Object) error
}

// FailCreate makes the next n creations of objects matching match (nil
// matches all; n < 0 means every one) fail with err, creating nothing. A nil
// err means a transient error wrapping ErrInjected.
func (e *Engine) FailCreate(match func(lbrecon.Object) bool, n int, err error) {
	if err == nil {
		err = fmt.Errorf("%w: create failed", ErrInjected)
	}
	e.inject(lbrecon.VerbCreate, match, n, func(*Engine, lbrecon.Object) error { return err })
}

// FailCreateAfter makes the next n matching creations create the object
// (tagged) and then fail with a transient error, as a call whose answer was
// lost would.
func (e *Engine) FailCreateAfter(match func(lbrecon.Object) bool, n int) {
	e.inject(lbrecon.VerbCreate, match, n, func(e *Engine, obj lbrecon.Object) error {
		if _, err := e.storeLost(obj); err != nil {
			return err
		}
		return fmt.Errorf("%w: 503 after create", ErrInjected)
	})
}

// CrashBeforeTag makes the next n matching creations create the object
// without its tags and then fail with ErrCrashed, as a client that crashed
// between creating and tagging (or whose separate tagging call failed)
// would leave it.
func (e *Engine) CrashBeforeTag(match func(lbrecon.Object) bool, n int) {
	e.inject(lbrecon.VerbCreate, match, n, func(e *Engine, obj lbrecon.Object) error {
		obj.Tags = nil
		if _, err := e.store(obj); err != nil {
			return err
		}
		return ErrCrashed
	})
}

// TurnFailed makes the next n matching objects created or repaired end their
// pending period failed instead of ok.
func (e *Engine) TurnFailed(match func(lbrecon.Object) bool, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.turn = append(e.turn, &fault{match: match, left: n})
}

// FailDestroy makes the next n matching destructions fail with a transient
// error, destroying nothing.
func (e *Engine) FailDestroy(match func(lbrecon.Object) bool, n int) {
	e.inject(lbrecon.VerbDestroy, match, n, func(*Engine, lbrecon.Object) error {
		return fmt.Errorf("%w: destroy failed", ErrInjected)
	})
}

// FailTag makes the next n matching Tag calls fail with a transient error.
func (e *Engine) FailTag(match func(lbrecon.Object) bool, n int) {
	e.inject(lbrecon.VerbTag, match, n, func(*Engine, lbrecon.Object) error {
		return fmt.Errorf("%w: tag failed", ErrInjected)
	})
}

// RateLimit makes the next n calls of verb fail with a [RateLimitError]
// asking to wait after (0: no hint).
func (e *Engine) RateLimit(verb lbrecon.Verb, n int, after time.Duration) {
	e.inject(verb, nil, n, func(*Engine, lbrecon.Object) error { return &RateLimitError{After: after} })
}

// RateLimitEvery makes every k-th call (of any verb) fail with a
// [RateLimitError] asking to wait after, until the engine is discarded.
func (e *Engine) RateLimitEvery(k int, after time.Duration) {
	if k <= 0 {
		return
	}
	n := 0
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults = append(e.faults, &fault{left: -1, match: func(lbrecon.Object) bool {
		n++
		return n%k == 0
	}, apply: func(*Engine, lbrecon.Object) error { return &RateLimitError{After: after} }})
}

// Unavailable makes every call, of any verb, fail with a transient 503
// error wrapping ErrInjected until d has passed on the engine's clock, as a
// provider's API does during an outage. Nothing is changed by those calls.
func (e *Engine) Unavailable(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	until := e.clock.Now().Add(d)
	e.faults = append(e.faults, &fault{left: -1, match: func(lbrecon.Object) bool {
		return e.clock.Now().Before(until) // called with e.mu held
	}, apply: func(*Engine, lbrecon.Object) error {
		return fmt.Errorf("%w: 503 service unavailable", ErrInjected)
	}})
}

// LoseCreateAnswers makes every k-th Create (counted from this call; k <= 0:
// none) create the object, tagged, and then fail with a transient error,
// as a call whose answer was lost would.
func (e *Engine) LoseCreateAnswers(k int) {
	if k <= 0 {
		return
	}
	n := 0
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults = append(e.faults, &fault{verb: lbrecon.VerbCreate, left: -1, match: func(lbrecon.Object) bool {
		n++
		return n%k == 0
	}, apply: func(e *Engine, obj lbrecon.Object) error {
		if _, err := e.storeLost(obj); err != nil {
			return err
		}
		return fmt.Errorf("%w: 503 after create, answer lost", ErrInjected)
	}})
}

func (e *Engine) inject(verb lbrecon.Verb, match func(lbrecon.Object) bool, n int, apply func(*Engine, lbrecon.Object) error) {
	if n == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults = append(e.faults, &fault{verb: verb, match: match, left: n, apply: apply})
}

// take consumes a matching fault, if any. Called with e.mu held.
func take(list []*fault, verb lbrecon.Verb, obj lbrecon.Object) *fault {
	for _, f := range list {
		if f.left == 0 || (f.verb != "" && f.verb != verb) || (f.match != nil && !f.match(obj)) {
			continue
		}
		if f.left > 0 {
			f.left--
		}
		return f
	}
	return nil
}
