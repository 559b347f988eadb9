package jitter

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Float64 returns a draw from r, uniformly in [0, 1) if r is; nil means
// math/rand/v2's Float64. A value outside [0, 1), or NaN, is clamped into
// it, so that a faulty source never gives a negative or overlong pause.
func Float64(r func() float64) float64 {
	if r == nil {
		return rand.Float64()
	}
	u := r()
	switch {
	case !(u > 0): // NaN, zero or below
		return 0
	case u >= 1:
		return math.Nextafter(1, 0)
	}
	return u
}

// Up returns d plus up to factor × d, drawn from r: the distribution of
// apimachinery's wait.Jitter(d, factor), a factor of zero or less counting
// as 1 as it does there.
func Up(r func() float64, d time.Duration, factor float64) time.Duration {
	if factor <= 0 {
		factor = 1
	}
	return d + time.Duration(Float64(r)*factor*float64(d))
}

// Int64N returns an integer drawn from r uniformly in [0, n), as
// math/rand/v2's Int64N(n) does; n of zero or less gives 0.
func Int64N(r func() float64, n int64) int64 {
	if n <= 0 {
		return 0
	}
	v := int64(Float64(r) * float64(n))
	return min(max(v, 0), n-1) // float rounding near 1 must not reach n
}

// Spread returns d spread uniformly over [d×(1-factor), d×(1+factor)],
// drawn from r: the randomization of cenkalti/backoff's
// ExponentialBackOff (including its +1 nanosecond on the span), which a
// factor of zero leaves undrawn.
func Spread(r func() float64, d time.Duration, factor float64) time.Duration {
	if factor == 0 {
		return d
	}
	delta := factor * float64(d)
	lo, hi := float64(d)-delta, float64(d)+delta
	return time.Duration(lo + Float64(r)*(hi-lo+1))
}

// Split returns a source of its own for one loop of a part whose Config
// names r, seeded by two draws from r; nil when r is nil (the loop then
// draws from the global source too). Loops that run on goroutines of
// their own, each with a split source, keep their draws however the
// goroutines that wake at one instant are ordered; sharing r, they would
// take each other's. Call it where the order of calls is fixed (a
// constructor), so that a seeded r gives each loop the same source every
// time. The source is safe for concurrent use.
func Split(r func() float64) func() float64 {
	if r == nil {
		return nil
	}
	const scale = 1 << 53 // Float64's precision: every seed bit drawn
	src := rand.New(rand.NewPCG(uint64(Float64(r)*scale), uint64(Float64(r)*scale)))
	var mu sync.Mutex
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return src.Float64()
	}
}
