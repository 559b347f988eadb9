package lbrecontest

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/lbrecon"
)

// nextVIP returns the address AssignVIP gets next. Called with e.mu held.
func (e *Engine) nextVIP() netip.Addr {
	n := e.vips
	return netip.AddrFrom4([4]byte{198, 51, 100 + byte(n/254), byte(1 + n%254)})
}

// isWrite reports whether verb changes the provider's objects.
func isWrite(verb lbrecon.Verb) bool {
	switch verb {
	case lbrecon.VerbCreate, lbrecon.VerbDestroy, lbrecon.VerbTag, lbrecon.VerbUpdate, lbrecon.VerbRepair:
		return true
	}
	return false
}

// throttle takes a token from the bucket (Config.Rate, Config.Burst), or
// returns the 429 of an empty bucket, with the time to the next token as
// its hint. Called with e.mu held.
func (e *Engine) throttle(now time.Time) error {
	if e.cfg.Rate <= 0 {
		return nil
	}
	burst := float64(max(e.cfg.Burst, 1))
	if e.bucketAt.IsZero() {
		e.bucket = burst
	} else {
		e.bucket = math.Min(burst, e.bucket+now.Sub(e.bucketAt).Seconds()*e.cfg.Rate)
	}
	e.bucketAt = now
	if e.bucket < 1 {
		wait := time.Duration(math.Ceil((1 - e.bucket) / e.cfg.Rate * float64(time.Second)))
		e.throttled++
		return &RateLimitError{After: wait}
	}
	e.bucket--
	return nil
}

// fence checks, with Config.Fence, the fencing token a write carries
// (lbrecon.TokenFrom) against the highest one the provider has seen, as
// a provider's conditional write does: a write without a token, or with a
// lower one, is refused for good and changes nothing. Called with e.mu
// held, when the write takes effect.
func (e *Engine) fence(ctx context.Context, verb lbrecon.Verb, obj lbrecon.Object) error {
	if !e.cfg.Fence || !isWrite(verb) {
		return nil
	}
	token, ok := lbrecon.TokenFrom(ctx)
	if !ok {
		return backoff.Permanent(fmt.Errorf("lbrecontest: 412 %s %v without a fencing token: %w", verb, obj, lbrecon.ErrNoToken))
	}
	if token < e.highest {
		e.fenced++
		return backoff.Permanent(fmt.Errorf("lbrecontest: 412 %s %v: %w", verb, obj, &lbrecon.FenceError{
			Fence: "lbrecontest provider", Stored: e.highest, Token: token, Clear: "Engine.ResetFence"}))
	}
	e.highest = token
	return nil
}

// Fenced returns how many writes the fence refused (Config.Fence), and
// Throttled how many calls the token bucket refused (Config.Rate).
func (e *Engine) Fenced() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.fenced
}

// Throttled returns how many calls the token bucket refused (Config.Rate).
func (e *Engine) Throttled() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.throttled
}

// FenceToken returns the highest fencing token a write carried
// (Config.Fence).
func (e *Engine) FenceToken() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.highest
}

// ResetFence sets the highest token the fence holds, also downwards, as
// an operator clears a provider's fence.
func (e *Engine) ResetFence(token uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.highest = token
}
