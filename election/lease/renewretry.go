package lease

import (
	"math"
	"time"

	"github.com/reconkit/reconkit/backoff"
)

// renewRetryJitter spreads the retries of failed renewals: each pause is
// drawn from [w, 1.2w].
const renewRetryJitter = 0.2

// renewRetryWait is the pause after the n-th failed renewal in a row, when
// rp is the RetryPeriod and left the validity the term has left. The first
// retry comes a RetryPeriod later, as client-go's leader retries; each
// further pause grows by half, plus up to a fifth at random, so that a
// term whose RenewDeadline outlasts 30 s of a persistent answer sends
// less than a request a second by then (a fixed RetryPeriod cost 1/rp,
// and six times that under conflicts, for the whole RenewDeadline).
//
// A pause that would start the next try later than half a RetryPeriod
// before the term's end is shortened to start it before then, drawn from
// the last third of the time to that instant, so the last try is not
// needlessly late and leaders do not make it together. A shortened pause
// is never below rp nor a quarter of the pause it replaces, so tries never
// come faster than the RetryPeriod the host chose and do not crowd towards
// the end: when no such try fits, the term ends first. Whatever the retries
// do, the term ends at ValidUntil (the watchdog). The first retry is
// never moved, whatever the term has left.
func renewRetryWait(n int, rp, left time.Duration, rand func() float64) time.Duration {
	if n == 1 {
		left = math.MaxInt64 // the first retry is client-go's: never moved
	}
	return backoff.Renewal{
		Initial:      rp,
		Multiplier:   1.5,
		Jitter:       renewRetryJitter,
		Reserve:      rp / 2,
		MinShortened: 0.25,
		Rand:         rand,
	}.Pause(n, left)
}
