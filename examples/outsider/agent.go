// Command outsider is a small node agent built on reconkit from outside its
// module, the way a new user builds one: its configuration comes from a
// ConfigMap through checkpoint, its Node is kept by nodestatus (reporting
// the ConfigOK condition and whether the version gate admits its release),
// and the newest release's leader converges a load balancer with lbrecon,
// version-gated by versiongate on the host's election.
//
// Lines that only connect one reconkit package to another end with a
// comment that says so; the README says how to count them.
package main

import (
	"context"
	"encoding/json"
	"net/netip"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/configmapsource"
	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/versiongate"
)

// Settings is the agent's configuration, JSON in a ConfigMap key.
type Settings struct {
	LoadBalancer string   `json:"loadBalancer"`
	Addresses    []string `json:"addresses"`
	Ports        []struct {
		Name         string `json:"name"`
		NodePort     uint16 `json:"nodePort"`
		ExternalPort uint16 `json:"externalPort"`
	} `json:"ports"`
	Targets []struct {
		Name    string `json:"name"`
		Address string `json:"address"`
	} `json:"targets"`
}

func parseSettings(b []byte) (Settings, error) {
	var s Settings
	return s, json.Unmarshal(b, &s)
}

// loadBalancer is the load balancer s describes.
func (s Settings) loadBalancer() (lbrecon.LoadBalancer, error) {
	lb := lbrecon.LoadBalancer{ID: s.LoadBalancer, Suffix: "outsider"}
	for _, p := range s.Ports {
		lb.Ports = append(lb.Ports, lbrecon.Port{Name: p.Name, NodePort: p.NodePort, ExternalPort: p.ExternalPort})
	}
	for _, a := range s.Addresses {
		addr, err := netip.ParseAddr(a)
		if err != nil {
			return lb, err
		}
		lb.Addresses = append(lb.Addresses, addr)
	}
	for _, t := range s.Targets {
		addr, err := netip.ParseAddr(t.Address)
		if err != nil {
			return lb, err
		}
		lb.Targets = append(lb.Targets, lbrecon.Target{Name: t.Name, Address: addr})
	}
	return lb, lb.Validate()
}

// validateSettings accepts settings without a load balancer (the agent
// then manages none) and refuses an unusable one.
func validateSettings(s Settings) error {
	if s.LoadBalancer == "" {
		return nil
	}
	_, err := s.loadBalancer()
	return err
}

// Deps is what an agent runs on: real servers in main, fakes in the test.
type Deps struct {
	NodeName  string
	NodeIP    string
	Version   versiongate.Version
	Kube      kubernetes.Interface
	Namespace string // of the ConfigMap holding the settings
	ConfigMap string
	Store     checkpoint.LKGStore
	Elector   election.Elector
	GateStore versiongate.Store
	Engine    lbrecon.Engine
	Local     Settings // runs until a configuration is assigned

	ReconcileInterval time.Duration // zero: versiongate's default
	SettleTime        time.Duration // zero: versiongate's default
	LBPollInterval    time.Duration // zero: lbrecon's default
}

// ConditionReleaseAdmitted is the condition the version gate reports besides
// checkpoint's ConfigOK: True while the gate admits this node's release.
const ConditionReleaseAdmitted = versiongate.ConditionReleaseReady

// OwnerTag marks the load-balancer objects the agents own.
const OwnerTag = "owner=outsider"

// Agent is one node agent.
type Agent struct {
	deps     Deps
	provider *nodestatus.Provider
	configs  *checkpoint.Controller[Settings]
	nodes    *nodestatus.NodeController
	gate     *versiongate.Gate

	// Used by the reconcile only, which the gate never runs concurrently.
	lb   *lbrecon.LoadBalancerReconciler
	lbID string
}

// New wires an agent.
func New(d Deps) (*Agent, error) {
	a := &Agent{deps: d, provider: nodestatus.NewProvider(nodestatus.ProviderConfig{})}
	source, err := configmapsource.New(configmapsource.Config{Client: d.Kube, Namespace: d.Namespace, Name: d.ConfigMap, Key: "settings.json"})
	if err != nil {
		return nil, err
	}
	a.configs, err = checkpoint.New(checkpoint.Config[Settings]{
		Store:      d.Store,
		Parse:      parseSettings,
		Validate:   validateSettings,
		Local:      d.Local,
		Source:     source,
		Conditions: a.provider, // glue
	})
	if err != nil {
		return nil, err
	}
	a.nodes, err = nodestatus.New(nodestatus.Config{
		Client:   d.Kube,
		Provider: a.provider,
		Node: &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: d.NodeName, Labels: map[string]string{"example.com/agent": "outsider"}},
			Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: d.NodeIP}}},
		},
	})
	if err != nil {
		return nil, err
	}
	a.gate, err = versiongate.New(versiongate.Config{
		Store:                    d.GateStore,
		NodeID:                   d.NodeName,
		Version:                  d.Version,
		MinimumCompatibleRelease: d.Version.Release,
		Candidate:                d.Elector,  // glue
		Conditions:               a.provider, // glue
		// After a lost record the node stops serving, then rejoins.
		RejoinAfterRecordLoss: true,
		Reconcile:             a.reconcile,
		ReconcileInterval:     d.ReconcileInterval,
		SettleTime:            d.SettleTime,
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Gate returns the agent's version gate, for tests and status pages.
func (a *Agent) Gate() *versiongate.Gate { return a.gate }

// Run boots the configuration and runs the agent until ctx ends. It returns
// nil then, and an error only for a real failure.
func (a *Agent) Run(ctx context.Context) error {
	if _, err := a.configs.Bootstrap(ctx); err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return a.configs.Run(ctx) })
	g.Go(func() error { return a.nodes.Run(ctx) })
	g.Go(func() error { return a.gate.Run(ctx) })
	return g.Wait()
}

// reconcile is the leader's work, run by the gate at every takeover and
// then every ReconcileInterval while the term lasts: converge the load
// balancer the running configuration describes.
func (a *Agent) reconcile(ctx context.Context, l election.Leadership) error {
	settings := a.configs.Status().Config // glue
	// The token reaches every engine call (lbrecon.TokenFrom), for a
	// provider that refuses writes of an older term.
	ctx = lbrecon.WithToken(ctx, l.Token()) // glue
	if err := lbrecon.TeardownExcept(ctx, a.lbConfig(), settings.LoadBalancer); err != nil {
		return err
	}
	if settings.LoadBalancer == "" {
		return nil
	}
	lb, err := settings.loadBalancer()
	if err != nil {
		return err
	}
	if a.lb == nil || a.lbID != lb.ID {
		if a.lb, err = lbrecon.NewLoadBalancer(a.lbConfig(), lb); err != nil {
			return err
		}
		a.lbID = lb.ID
	} else if err := a.lb.SetLoadBalancer(lb); err != nil {
		return err
	}
	return a.lb.Reconcile(ctx)
}

func (a *Agent) lbConfig() lbrecon.Config {
	return lbrecon.Config{Engine: a.deps.Engine, Tag: OwnerTag, PollInterval: a.deps.LBPollInterval}
}
