package backoff_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/reconkit/reconkit/backoff"
)

// The retries of a lease renewal that fails for ever: pauses grow by half
// from 500 ms to the renewal interval, each up to a fifth longer, and the
// last try is brought forward to start a second before the lease's local
// deadline. The jitter comes from a seeded source so that the output is
// reproducible; a host leaves Rand nil.
func ExampleRenewal() {
	r := backoff.Renewal{
		Initial:      500 * time.Millisecond,
		Multiplier:   1.5,
		Max:          5 * time.Second,
		Jitter:       0.2,
		Reserve:      time.Second,
		MinShortened: 0.25,
		Rand:         rand.New(rand.NewPCG(1, 2)).Float64,
	}
	deadline := 12 * time.Second // from the first failure
	var now time.Duration
	for n := 1; now < deadline; n++ {
		pause := r.Pause(n, deadline-now)
		now += pause
		if now < deadline {
			fmt.Printf("try %d at %v\n", n+1, now.Round(time.Millisecond))
		} else {
			fmt.Println("deadline")
		}
	}
	// Output:
	// try 2 at 568ms
	// try 3 at 1.387s
	// try 4 at 2.626s
	// try 5 at 4.459s
	// try 6 at 7.394s
	// try 7 at 10.783s
	// deadline
}
