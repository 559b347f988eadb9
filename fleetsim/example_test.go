package fleetsim_test

import (
	"fmt"

	"github.com/reconkit/reconkit/fleetsim"
)

// A nemesis without crashes keeps every other kind of event, with its
// default weight.
func ExampleNemesis_Without() {
	n := fleetsim.Nemesis{}.Without(fleetsim.Crash, fleetsim.ProviderOutage)
	for _, k := range fleetsim.Kinds() {
		fmt.Printf("%s: %d\n", k, n.Weights[k])
	}
	// Output:
	// crash: 0
	// partition-apiserver: 3
	// partition-provider: 2
	// apiserver-restart: 2
	// delete-lease: 1
	// operator-edit: 1
	// provider-429: 2
	// provider-outage: 0
	// provider-fail-create: 1
	// provider-lost-answer: 1
	// empty-watches: 1
	// rolling-upgrade: 1
	// slow-reads: 1
	// slow-writes: 1
	// service-change: 1
	// namespace-delete: 1
	// clock-drift: 1
}
