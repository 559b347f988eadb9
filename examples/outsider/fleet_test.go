package main

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/fleetsim"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// fleetAgent runs one outsider agent on what the simulator gives it, with
// its checkpoints on the agent's own disk.
func fleetAgent(ctx context.Context, d fleetsim.Deps) error {
	store, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: d.Dir + "/outsider", FS: d.FS})
	if err != nil {
		return err
	}
	defer store.Close()
	return Run(ctx, Deps{Kube: d.Kube, Node: d.Name, IP: d.IP, Namespace: namespace, Store: d.Checkpoints(store), Engine: d.Engine,
		Mux: http.NewServeMux(), Clock: d.Clock, Rand: d.Rand})
}

// fleetConfig is the outsider fleet: the settings ConfigMap, the load
// balancer over every agent's Node once the nemesis stopped, and an
// operator who breaks the ConfigMap for a while.
//
// An agent whose assigned configuration its checkpoint store records as
// refused reports ConfigOK false and is expected out of the load balancer
// (the timeline says which and why). That includes a configuration rolled
// back as a crash loop because the nemesis crashed the agent MaxTrialStarts
// times within its trial: checkpoint cannot tell those crashes from the
// configuration's own, and documents the verdict as holding until the
// assignment changes (as the kubelet's dynamic configuration did; its
// CrashLoopBackOff retries a container, not a configuration it rejected).
func fleetConfig() fleetsim.Config {
	setSettings := func(value string) func(context.Context, kubernetes.Interface) error {
		return func(ctx context.Context, c kubernetes.Interface) error {
			cm, err := c.CoreV1().ConfigMaps(namespace).Get(ctx, "outsider", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cm.Data["settings.json"] = value
			_, err = c.CoreV1().ConfigMaps(namespace).Update(ctx, cm, metav1.UpdateOptions{})
			return err
		}
	}
	return fleetsim.Config{
		Agent: fleetAgent,
		Objects: []runtime.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "outsider"},
			Data: map[string]string{"settings.json": settings}}},
		Tag: tag,
		Converged: func(fleet []fleetsim.Deps) func([]lbrecon.Object) bool {
			var targets []lbrecon.Target
			if !slices.ContainsFunc(fleet, func(d fleetsim.Deps) bool {
				return d.Checkpoint.Error == nil || d.Checkpoint.LastKnownGood != ""
			}) {
				// No agent has settings: whichever is elected resigns and
				// leaves the load balancer as it is (see Run).
				return func([]lbrecon.Object) bool { return true }
			}
			for _, d := range fleet {
				if d.Checkpoint.Error != nil {
					continue // ConfigOK false: out of the load balancer
				}
				targets = append(targets, lbrecon.Target{Name: d.Name, Address: netip.MustParseAddr(d.IP)})
			}
			return lbrecontest.Converged(Settings{Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10")},
				Ports: []lbrecon.Port{{Name: "http", NodePort: 30080, ExternalPort: 80}}}.LoadBalancer(targets), tag)
		},
		Nemesis: fleetsim.Nemesis{Edits: []fleetsim.Edit{{Name: "bad settings.json",
			Do: setSettings(`{"ports": [`), Undo: setSettings(settings)}}},
	}
}

// ciNemesis is the nemesis of the seeds CI runs: every kind, crashes
// rarer than one per checkpoint trial period (10 minutes) for each agent.
func ciNemesis(n fleetsim.Nemesis) fleetsim.Nemesis {
	n = n.Without() // a copy of its weights (the defaults when it has none)
	n.Weights[fleetsim.Crash] = 1
	n.Every = 30 * time.Second
	return n
}

// TestFleet runs three outsider agents for 10 minutes of faults and a quiet
// period, for a fixed set of seeds (-fleetsim.seed=N runs one).
//
// Its operator also leaves a preferredHolder on the leader Lease, as a
// fleet that ran Coordinated Leader Election does, with operator edits
// three times as frequent so that most seeds make it: term-churn judges
// whether the candidates clear it.
func TestFleet(t *testing.T) {
	cfg := fleetConfig()
	cfg.Nemesis = ciNemesis(cfg.Nemesis)
	cfg.Nemesis.Edits = append(cfg.Nemesis.Edits, fleetsim.LeftoverPreferredHolder(namespace, "outsider-leader"))
	cfg.Nemesis.Weights[fleetsim.OperatorEdit] = 3
	cfg.Duration = 10 * time.Minute
	fleetsim.Test(t, cfg, 1, 2, 3)
}

// TestFleetCrashLoop crashes the agents often enough that some are
// crashed three times within their checkpoint trial: their configuration
// is rolled back as a crash loop, the timeline says so, and the fleet
// converges on a load balancer without them (see fleetConfig). With seed 1
// one agent of four is.
func TestFleetCrashLoop(t *testing.T) {
	cfg := fleetConfig()
	cfg.Agents, cfg.Duration = 4, 20*time.Minute
	cfg.Nemesis = fleetsim.Nemesis{Every: 2 * time.Minute}.Only(fleetsim.Crash)
	cfg.Start = time.Now().UTC().Truncate(24 * time.Hour)
	synctest.Test(t, func(t *testing.T) {
		r := fleetsim.Simulate(t.Context(), cfg)
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		tl := fleetsim.Window(r.Timeline, 0, 0, 24*time.Hour)
		// Some agents, not all: with none the expectation is not exercised,
		// with all no agent has settings and nothing is judged.
		if n := strings.Count(tl, "refused=true "+checkpoint.ReasonCrashLoop); n == 0 || n == cfg.Agents {
			t.Fatalf("%d of %d agents' configurations were rolled back as a crash loop, want some; timeline:\n%s", n, cfg.Agents, tl)
		}
	})
}

// TestFleetStatusDeletedMidTerm runs TestFleet's fleet on the seed that
// found a defect since fixed: a regression test.
//   - seed 2 (Converges at 20m): the status Lease, deleted at 6m21s while
//     agent-0 led, stayed terminating behind its finalizer for as long as
//     agent-0 kept its term (it was recreated only at the next term's
//     Fence); agent-1, restarted at 9m54s, waited in WaitReady for ever
//     and never got its backend. The leader now reads the status back
//     before each periodic reconcile and, finding it terminating, fences
//     again within its term, which creates the Lease again
//     (versiongate/kubestore TestLeaderRecoversStatusDeletedMidTerm).
func TestFleetStatusDeletedMidTerm(t *testing.T) {
	cfg := fleetConfig()
	cfg.Nemesis = ciNemesis(cfg.Nemesis)
	cfg.Duration = 10 * time.Minute
	fleetsim.Test(t, cfg, 2)
}

// TestFleetFive is five outsider agents for an hour of faults, the fleet
// cmd/soak measures; it runs only with seeds given (-fleetsim.count).
func TestFleetFive(t *testing.T) {
	if !fleetsim.Seeded() {
		t.Skip("runs with -fleetsim.seed or -fleetsim.count (cmd/soak)")
	}
	cfg := fleetConfig()
	cfg.Agents = 5
	cfg.Nemesis = ciNemesis(cfg.Nemesis)
	cfg.Duration = time.Hour
	fleetsim.Test(t, cfg)
}

// TestFleetReplay runs one seed of TestFleet's fleet five times and logs
// how many runs gave the first run's timeline; it measures and does not
// judge. It runs only with a seed given (-fleetsim.seed=N).
func TestFleetReplay(t *testing.T) {
	if !fleetsim.Seeded() {
		t.Skip("runs with -fleetsim.seed (a measurement)")
	}
	cfg := fleetConfig()
	cfg.Nemesis = ciNemesis(cfg.Nemesis)
	cfg.Duration = 10 * time.Minute
	seed := uint64(1)
	for _, arg := range os.Args {
		if v, ok := strings.CutPrefix(arg, "-fleetsim.seed="); ok {
			seed, _ = strconv.ParseUint(v, 10, 64)
		}
	}
	rate, parted := fleetsim.ReplayRate(t, cfg, seed, 5)
	t.Logf("seed %d replayed exactly in %.0f%% of 5 runs (the first included); first difference: %s", seed, 100*rate, parted)
}

// TestFleetDriftBeyondBound runs the outsider fleet with every agent's
// clock (Deps.Clock) drifting, set anew every 20 seconds on average: a
// drift up to 50% from the apiserver's clock, far beyond the 2% the
// agent's parts document, makes a checkpoint trial end early on a fast
// clock, which lkg-proven catches; a drift within 2% passes.
func TestFleetDriftBeyondBound(t *testing.T) {
	for _, tc := range []struct {
		maxDrift float64
		want     fleetsim.Invariant
	}{{0.5, fleetsim.LKGProven}, {fleetsim.DefaultMaxDrift, ""}} {
		t.Run(fmt.Sprint(tc.maxDrift), func(t *testing.T) {
			cfg := fleetConfig()
			cfg.Nemesis = fleetsim.Nemesis{Every: 20 * time.Second, MaxDrift: tc.maxDrift}.Only(fleetsim.ClockDrift)
			cfg.Duration = 15 * time.Minute
			cfg.Start = time.Now().UTC().Truncate(24 * time.Hour)
			synctest.Test(t, func(t *testing.T) {
				r := fleetsim.Simulate(t.Context(), cfg)
				var got fleetsim.Invariant
				if len(r.Violations) > 0 {
					got = r.Violations[0].Invariant
				}
				if got != tc.want {
					t.Fatalf("first violation %q, want %q; %v", got, tc.want, r.Err())
				}
			})
		})
	}
}
