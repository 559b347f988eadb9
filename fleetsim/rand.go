package fleetsim

import (
	"fmt"
	"sync"
)

// loopRand returns the random source of one loop of one run of an agent
// (Deps.Rand): a stream of its own, drawn from the run's seed, the agent's
// name, how many runs of it came before (boot) and the loop's name, so
// that no two agents, runs or loops share draws, and the same seed gives
// each the same draws. It is safe for concurrent use.
func loopRand(seed uint64, agent string, boot int, loop string) func() float64 {
	r := stream(seed, fmt.Sprintf("rand/%s/%d/%s", agent, boot, loop))
	var mu sync.Mutex
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Float64()
	}
}
