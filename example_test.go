package reconkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/electiontest"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// agentConfig is a host's own configuration type.
type agentConfig struct {
	Targets []string `json:"targets"`
}

// A node agent boots its configuration through checkpoint, campaigns for
// leadership, and while it leads converges a load balancer to that
// configuration. It runs here on the in-memory election and engine; with
// election/etcd's New or election/lease's New and a provider's
// lbrecon.Engine the wiring is the same.
func Example_wiring() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// 1. Configuration: last-known-good checkpoints, local defaults.
	configs, err := checkpoint.New(checkpoint.Config[agentConfig]{
		Store: &checkpoint.MemStore{},
		Parse: func(b []byte) (agentConfig, error) {
			var c agentConfig
			return c, json.Unmarshal(b, &c)
		},
		Validate: func(c agentConfig) error {
			if len(c.Targets) == 0 {
				return errors.New("no targets")
			}
			return nil
		},
		Local: agentConfig{Targets: []string{"10.0.0.1"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	boot, err := configs.Bootstrap(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("config:", boot.Condition.Type, boot.Condition.Status, boot.Condition.Reason)

	// 2. Leadership: the in-memory election stands in for etcd or a Lease.
	candidate := electiontest.NewElection().NewCandidate("agent-1")

	// 3. The leader converges the load balancer, then steps down. One
	// reconciler per load balancer, kept across terms: it remembers writes
	// the provider has not confirmed yet.
	engine := lbrecontest.New(lbrecontest.Config{})
	lb := lbrecon.LoadBalancer{
		ID:        "lb-1",
		Suffix:    "agents",
		Ports:     []lbrecon.Port{{Name: "http", NodePort: 30080, ExternalPort: 80}},
		Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10")},
	}
	for i, addr := range boot.Config.Targets {
		lb.Targets = append(lb.Targets, lbrecon.Target{Name: fmt.Sprint("node-", i), Address: netip.MustParseAddr(addr)})
	}
	// A provider whose listing lags wants a journal shared by the replicas
	// (lbrecon.FileJournal on shared storage, or the CCM's journal); this
	// engine lists what it holds at once, so this host chooses none.
	r, err := lbrecon.NewLoadBalancer(lbrecon.Config{Engine: engine, Tag: "owner=agents", Journal: lbrecon.NoJournal}, lb)
	if err != nil {
		fmt.Println(err)
		return
	}
	lead := func(ctx context.Context, l election.Leadership) error {
		// The term's token reaches every engine call (lbrecon.TokenFrom).
		if err := r.Reconcile(lbrecon.WithToken(ctx, l.Token())); err != nil {
			return err
		}
		status, _ := r.Status(ctx)
		fmt.Printf("%s (term %d) converged: %v\n", l.Identity(), l.Token(), status)
		cancel() // a real agent keeps leading until its context ends
		return nil
	}
	err = election.Run(ctx, candidate, lead)
	fmt.Println("stopped:", err) // nil: Run returns nil when its context ends
	// Output:
	// config: ConfigOK True LocalConfig
	// agent-1 (term 1) converged: map[192.0.2.10:[80]]
	// stopped: <nil>
}
