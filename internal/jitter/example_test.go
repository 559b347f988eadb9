package jitter_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/reconkit/reconkit/internal/jitter"
)

// A part built with a seeded source splits it, in its constructor, into
// one source per loop; each loop's pauses then replay with the seed.
func Example() {
	seeded := rand.New(rand.NewPCG(1, 2)).Float64
	watch, retry := jitter.Split(seeded), jitter.Split(seeded)
	again := rand.New(rand.NewPCG(1, 2)).Float64
	watch2, _ := jitter.Split(again), jitter.Split(again)
	p, p2 := jitter.Up(watch, time.Second, 0.5), jitter.Up(watch2, time.Second, 0.5)
	fmt.Println(p == p2, p >= time.Second && p <= 1500*time.Millisecond)
	fmt.Println(jitter.Up(retry, time.Second, 0.5) != p)
	fmt.Println(jitter.Up(func() float64 { return 0.5 }, time.Second, 0.2))
	// Output:
	// true true
	// true
	// 1.1s
}
