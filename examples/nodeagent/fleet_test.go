package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/fleetsim"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
	"github.com/reconkit/reconkit/versiongate"
)

// fleetOptions are the agents' timings in the simulator: those of a
// cluster rather than of the interactive demo.
func fleetOptions() options {
	return options{namespace: "default", electionTTL: 15 * time.Second, recordTTL: 15 * time.Second,
		nodeLease: 40 * time.Second, trial: time.Minute, reconcileInterval: 30 * time.Second, settle: 2 * time.Second}
}

// fleetCoordination is the Lease election and the Lease gate store on the
// client the simulator gives each agent.
type fleetCoordination struct {
	*kubeCoordination
	kube kubernetes.Interface
}

func (c fleetCoordination) join(name string, h hooks, events election.EventRecorder) (*member, error) {
	m := &member{}
	var err error
	if m.store, err = c.store(c.kube); err != nil {
		return nil, err
	}
	if m.elector, err = c.elector(c.kube, name, h.Election, events); err != nil {
		return nil, err
	}
	return m, nil
}

// fleetAgent runs agent-<Index+1> (its Node 10.0.0.<Index+1>) at the
// run's release on what the simulator gives it: its client, its disk for
// the checkpoints, its link to the provider, and its backend's health for
// its Node's ping (heartbeats stop while that link is cut). It tells the world when
// it serves and what its checkpoint store records. No events are recorded.
func fleetAgent(ctx context.Context, d fleetsim.Deps) error {
	return fleetAgentWith(fleetOptions())(ctx, d)
}

// fleetAgentWith is fleetAgent with the options opts.
func fleetAgentWith(opts options) fleetsim.Agent {
	return func(ctx context.Context, d fleetsim.Deps) error { return runFleetAgent(ctx, opts, d) }
}

func runFleetAgent(ctx context.Context, opts options, d fleetsim.Deps) error {
	e := &env{opts: opts, log: logr.FromContextOrDiscard(ctx), say: func(string, ...any) {}, kube: d.Kube,
		kubeMode: kubeMemory, ops: newOps(), changes: make(chan struct{}, 1), agents: make([]*agent, d.Index+1),
		stateDir: d.Dir, fs: d.FS, lb: &lbStore{via: d.Engine.(lbEngine)}, serving: d.Serving, wrapStore: d.Checkpoints,
		ping: d.Ping, clock: d.Clock}
	e.coord = fleetCoordination{kubeCoordination: &kubeCoordination{opts: opts, clock: d.Clock}, kube: d.Kube}
	a := newAgent(e, d.Index+1, d.Release)
	if err := a.start(ctx); err != nil {
		return err
	}
	defer a.wait()
	select {
	case <-ctx.Done():
		return nil
	case <-a.done:
		return errors.New(a.snapshot().Stopped)
	}
}

// fleetConfig is a nodeagent fleet: the ConfigMap of localConfig, the load
// balancer over every agent's Node once the nemesis stopped, and an
// operator who assigns a configuration that fails its trial for a while.
func fleetConfig() fleetsim.Config {
	good := localConfig()
	bad := good
	bad.MaxConnections = 1 // below every agent's load: its trial fails
	assign := func(c agentConfig) func(context.Context, kubernetes.Interface) error {
		return func(ctx context.Context, k kubernetes.Interface) error {
			_, err := (&configAssigner{client: k, namespace: "default"}).assign(ctx, mustJSON(c))
			return err
		}
	}
	return fleetsim.Config{
		Agent:           fleetAgent,
		CheckpointTrial: fleetOptions().trial,
		Nodes: fleetsim.Nodes{Name: func(d fleetsim.Deps) string { return fmt.Sprintf("agent-%d", d.Index+1) },
			PingInterval: fleetOptions().nodeLease / 2}, // nodeControllerConfig's
		Gate: fleetsim.Gate{Releases: []versiongate.Version{{Release: versiongate.Release{Major: 1}}}, MinimumCompatible: minimumCompatible},
		Objects: []runtime.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: configMapName},
			Data: map[string]string{configMapKey: mustJSON(good)}}},
		Tag: ownerTag,
		// The leader runs the newest release (only its agents campaign): its
		// ports, and the agents it is compatible with, those whose
		// readiness wait lets them serve.
		Converged: func(fleet []fleetsim.Deps) func([]lbrecon.Object) bool {
			newest := fleet[0].Release.Release
			for _, d := range fleet {
				if newest.Less(d.Release.Release) {
					newest = d.Release.Release
				}
			}
			var targets []lbrecon.Target
			for _, d := range fleet {
				if d.Release.Release.Less(minimumCompatible(newest)) {
					continue
				}
				targets = append(targets, lbrecon.Target{Name: fmt.Sprintf("agent-%d", d.Index+1), Address: netip.MustParseAddr(d.IP)})
			}
			lb, err := good.loadBalancer(releasePorts(newest), targets)
			if err != nil {
				panic(err) // localConfig is valid
			}
			return lbrecontest.Converged(lb, ownerTag)
		},
		Nemesis: fleetsim.Nemesis{Edits: []fleetsim.Edit{{Name: "assign maxConnections 1", Do: assign(bad), Undo: assign(good)}}},
	}
}

// TestFleet runs three node agents for 10 minutes of faults and a quiet
// period, for a fixed set of seeds (-fleetsim.seed=N runs one), under
// every kind of fault.
//
// Its agents are upgraded, one at a time at random, from release 1.0 to
// 1.1 (which adds https; the quiet period completes the rollout), and a
// node at 1.1 serves only once a leader at 1.1 has reconciled (the https
// port on the load balancer): between the first node's upgrade and the
// last one's, every upgraded node waits in WaitReady while the leader at
// 1.1 holds back (it reconciles only once no 1.0 node has a record),
// through partitions, watches that end and apiserver restarts, on a
// status that nobody writes. The apiserver keeps 5 minutes of watch
// history (etcd's compaction interval), and its restarts make every older
// resourceVersion answer 410.
func TestFleet(t *testing.T) {
	fleetsim.Test(t, upgradeFleet(), 1, 2, 3)
}

// upgradeFleet is TestFleet's fleet.
func upgradeFleet() fleetsim.Config {
	cfg := fleetConfig()
	opts := fleetOptions()
	opts.ownReconciler = true
	cfg.Agent = fleetAgentWith(opts)
	cfg.Duration = 10 * time.Minute
	cfg.Gate.Releases = append(cfg.Gate.Releases, versiongate.Version{Release: httpsRelease})
	cfg.Nemesis = cfg.Nemesis.Without()
	cfg.Nemesis.Every = 30 * time.Second
	cfg.Kube.WatchWindow = 5 * time.Minute
	return cfg
}

// TestFleetRollout is TestFleet's fleet with rolling upgrades three times
// as frequent as any other kind of event, as in a fleet whose rollout goes
// on while the rest of the world does: upgraded nodes spend more of the
// run waiting in WaitReady for the rollout to complete.
//
// Its world is harder than TestFleet's where a waiting node meets it: an
// event every 12 s rather than 30 s, and partitions from the apiserver
// twice as often as any other fault (a node's link, or the load balancer
// in front of the apiserver, failing), so that a node waiting in WaitReady
// is cut off while it waits; and each agent within 90 requests of one kind
// a minute, not 120. A partitioned node's readiness wait retries its
// status read until its version record, not renewed, is lost (its 15 s
// TTL): backed off from 100ms it makes about 7 reads meanwhile, at a fixed
// 100ms about 150, past 90 within 9 s where 120 needed 12 of the record's
// 15 s. A loop at the DESIGN's steady limit (one request a second, with
// jitter) stays below 90. With an event every 15 s, two of the unpatched
// seeds 1 to 80 had a loop reach 61 of one kind: the kubestore reaper
// deleting, once a second, a record it had already deleted while its
// watches were cut (a defect, fixed since; seeds 1 to 30 then stayed
// within 55); with every 12 s, seeds 1 to 30 and the CI seeds stayed
// within 90. With 120 a minute, an event every 30 s
// and the default weights, cmd/defects' versiongate-ready-backoff was
// found by 1 of seeds 1 to 10; with these, by 16 of seeds 1 to 20, and by
// 3, 2 and 3 of the CI seeds in three runs.
func TestFleetRollout(t *testing.T) {
	fleetsim.Test(t, rolloutFleet(), 1, 2, 3)
}

// rolloutFleet is TestFleetRollout's fleet.
func rolloutFleet() fleetsim.Config {
	cfg := upgradeFleet()
	cfg.Nemesis.Weights[fleetsim.RollingUpgrade] = 3
	cfg.Nemesis.Weights[fleetsim.PartitionAPIServer] = 6
	cfg.Nemesis.Every = 12 * time.Second
	cfg.Budget.PerKind = 90
	return cfg
}

// TestFleetStatusDeletedMidTerm runs TestFleet's fleet (one release) on
// the seed that found a defect since fixed: a regression test.
//   - seed 1 (Converges at 20m): the gate's status Lease, deleted at 6m1s,
//     stayed terminating behind its finalizer while its leader kept its
//     term (it was recreated only at the next term's Fence); agent-1's
//     readiness wait read it every 5 to 15 seconds, across two apiserver
//     restarts, for ever, and the Node never got its backend. The leader
//     now reads the status back before each periodic reconcile and,
//     finding it terminating, fences again within its term, which creates
//     the Lease again (versiongate/kubestore
//     TestLeaderRecoversStatusDeletedMidTerm).
func TestFleetStatusDeletedMidTerm(t *testing.T) {
	cfg := fleetConfig()
	cfg.Duration = 10 * time.Minute
	cfg.Nemesis.Every = 30 * time.Second
	fleetsim.Test(t, cfg, 1)
}

// TestFleetDriftBeyondBound runs the node agents with every agent's clock
// drifting, set anew every 10 seconds on average, while the operator
// assigns configurations: each agent's election, gate, heartbeats,
// configuration trials and load-balancer waits run on its clock. A drift
// up to 50% from the apiserver's clock, far beyond the 2% the parts
// document, makes a one-minute configuration trial end early on a fast
// clock, which lkg-proven catches; a drift within 2% passes.
func TestFleetDriftBeyondBound(t *testing.T) {
	for _, tc := range []struct {
		maxDrift float64
		want     fleetsim.Invariant
	}{{0.5, fleetsim.LKGProven}, {fleetsim.DefaultMaxDrift, ""}} {
		t.Run(fmt.Sprint(tc.maxDrift), func(t *testing.T) {
			cfg := fleetConfig()
			cfg.Nemesis = fleetsim.Nemesis{Every: 10 * time.Second, MaxDrift: tc.maxDrift, Edits: cfg.Nemesis.Edits}.
				Only(fleetsim.ClockDrift, fleetsim.OperatorEdit)
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
