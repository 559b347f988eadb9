package fleetsim

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/versiongate"
)

// trialAgent runs a checkpoint.Controller whose trial lasts trial, on its
// disk, with one configuration assigned.
func trialAgent(trial time.Duration) Agent {
	return func(ctx context.Context, d Deps) error {
		fs, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: d.Dir + "/config", FS: d.FS})
		if err != nil {
			return err
		}
		defer fs.Close()
		c, err := checkpoint.New(checkpoint.Config[string]{Store: d.Checkpoints(fs), TrialDuration: trial,
			Parse:    func(b []byte) (string, error) { return string(b), nil },
			Validate: func(string) error { return nil },
			Source: &checkpoint.PollSource{Fetch: func(context.Context) ([]byte, checkpoint.Source, error) {
				return []byte("v1"), checkpoint.Source{}, nil
			}}})
		if err != nil {
			return err
		}
		if _, err := c.Bootstrap(ctx); err != nil {
			return nil // its disk was cut on a crash
		}
		_ = c.Run(ctx)
		return nil
	}
}

// An agent whose trial lasts the documented period passes LKGProven, and
// one whose trial is shorter than it claims is caught when its
// configuration becomes last-known-good.
func TestLKGProven(t *testing.T) {
	cfg := Config{Agents: 2, Duration: 15 * time.Minute, Quiet: time.Minute, CheckpointTrial: 2 * time.Minute,
		Nemesis: Nemesis{Every: 5 * time.Minute}.Only(Crash)}
	cfg.Agent = trialAgent(2 * time.Minute)
	r := simulate(t, cfg)
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(Window(r.Timeline, 0, 0, time.Hour), `last-known-good "`) {
		t.Fatal("no configuration became last-known-good: the check was never exercised")
	}
	cfg.Agent = trialAgent(30 * time.Second)
	v := only(t, simulate(t, cfg), LKGProven)
	if !strings.Contains(v.Detail, "after its trial started, want at least 1m57.6") || !strings.Contains(v.Detail, "its trial of 2m0s") {
		t.Errorf("violation %q, want it to give the trial's length", v.Detail)
	}
}

// heartbeat registers a Ready Node named after the agent and renews its
// Lease every 10 seconds. With restore, it is a nodestatus.NodeController;
// without, it never writes the Node's status again (the defect of a
// heartbeat that stopped: a Node marked Unknown stays so).
func heartbeat(restore bool) Agent {
	return func(ctx context.Context, d Deps) error {
		if restore {
			c, err := nodestatus.New(nodestatus.Config{Client: d.Kube, Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: d.Name}},
				Provider: nodestatus.NewProvider(nodestatus.ProviderConfig{})})
			if err != nil {
				return err
			}
			_ = c.Run(ctx)
			return nil
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: d.Name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		_, _ = d.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		leases := d.Kube.CoordinationV1().Leases(corev1.NamespaceNodeLease)
		for {
			now := metav1.NewMicroTime(time.Now())
			l, err := leases.Get(ctx, d.Name, metav1.GetOptions{})
			if err != nil {
				_, _ = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: corev1.NamespaceNodeLease},
					Spec: coordinationv1.LeaseSpec{RenewTime: &now}}, metav1.CreateOptions{})
			} else {
				l.Spec.RenewTime = &now
				_, _ = leases.Update(ctx, l, metav1.UpdateOptions{})
			}
			if !sleepCtx(ctx, 10*time.Second) {
				return nil
			}
		}
	}
}

// nodeConfig partitions agents from the apiserver, some for longer than
// the grace period.
func nodeConfig(a Agent) Config {
	return Config{Agent: a, Duration: 30 * time.Minute, Quiet: time.Minute,
		Nodes:   Nodes{Name: func(d Deps) string { return d.Name }},
		Nemesis: Nemesis{}.Only(PartitionAPIServer)}
}

// nodestatus's NodeController restores a Node the lifecycle marked
// Unknown within the bound; an agent that only renews its Lease leaves it
// Unknown and is caught.
func TestNodeReady(t *testing.T) {
	r := simulate(t, nodeConfig(heartbeat(true)))
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(Window(r.Timeline, 0, 0, time.Hour), "Ready Unknown") {
		t.Fatal("no Node was marked Unknown: the check was never exercised")
	}
	v := only(t, simulate(t, nodeConfig(heartbeat(false))), NodeReady)
	if !strings.Contains(v.Detail, "still Ready Unknown") {
		t.Errorf("violation %q, want it to say the Node is still Unknown", v.Detail)
	}
}

// gated is an agent of a fleet with a version gate: it serves from its
// start (honest only when every agent runs one release), and writes to the
// provider every 30 seconds, as a leader of a term of its own would, with
// the time as its token.
func gated(ctx context.Context, d Deps) error {
	d.Serving(true)
	for {
		token := uint64(time.Now().UnixNano())
		term, end := context.WithCancel(ctx) // one term per write
		_, _ = d.Engine.Create(lbrecon.WithToken(term, token), lbrecon.Object{Kind: lbrecon.KindBackend, Name: "b"})
		end()
		if !sleepCtx(ctx, 30*time.Second) {
			return nil
		}
	}
}

// A fleet on one release violates nothing; once rolling upgrades bring the
// leader to a release its old peers cannot serve with, an agent that
// serves regardless is caught at the leader's next write.
func TestNoIncompatibleServing(t *testing.T) {
	v1, v2 := versiongate.Version{Release: versiongate.Release{Major: 1}}, versiongate.Version{Release: versiongate.Release{Major: 2}}
	cfg := Config{Agent: gated, Duration: 10 * time.Minute, Quiet: time.Minute, Gate: Gate{Releases: []versiongate.Version{v1}},
		Nemesis: Nemesis{}.Only(RollingUpgrade)}
	if err := simulate(t, cfg).Err(); err != nil {
		t.Fatal(err)
	}
	cfg.Gate.Releases = append(cfg.Gate.Releases, v2)
	cfg.Nemesis = Nemesis{}.Only(RollingUpgrade)
	v := only(t, simulate(t, cfg), NoIncompatibleServing)
	if !strings.Contains(v.Detail, "at release 2.0.0") || !strings.Contains(v.Detail, "at 1.0.0") {
		t.Errorf("violation %q, want it to name both releases", v.Detail)
	}
}

// pinger registers its Node with a nodestatus.NodeController that pings
// Deps.Ping every 10 seconds and stops heartbeats while it fails. With
// stuck, a run whose ping failed once never heartbeats again.
func pinger(stuck bool) Agent {
	return func(ctx context.Context, d Deps) error {
		ping := d.Ping
		if stuck {
			var failed atomic.Bool
			ping = func(ctx context.Context) error {
				if err := d.Ping(ctx); err != nil || failed.Load() {
					failed.Store(true)
					return errors.Join(err, errors.New("failed once"))
				}
				return nil
			}
		}
		c, err := nodestatus.New(nodestatus.Config{Client: d.Kube, Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: d.Name}},
			Provider:    nodestatus.NewProvider(nodestatus.ProviderConfig{Ping: ping}),
			PingFailure: nodestatus.PingFailureStopHeartbeat, PingInterval: 10 * time.Second})
		if err != nil {
			return err
		}
		_ = c.Run(ctx)
		return nil
	}
}

// A Node whose pings (Deps.Ping) fail while its provider link is cut goes
// Unknown, and NodeReady gives it Within plus Nodes.PingInterval after the
// heal; one whose heartbeats never resume is caught.
func TestNodeReadyPinged(t *testing.T) {
	cfg := Config{Agent: pinger(false), Duration: 30 * time.Minute, Quiet: time.Minute,
		Nodes:   Nodes{Name: func(d Deps) string { return d.Name }, PingInterval: 10 * time.Second},
		Nemesis: Nemesis{}.Only(PartitionProvider)}
	r := simulate(t, cfg)
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(Window(r.Timeline, 0, 0, time.Hour), "Ready Unknown") {
		t.Fatal("no Node was marked Unknown: the check was never exercised")
	}
	cfg.Agent = pinger(true)
	v := only(t, simulate(t, cfg), NodeReady)
	if !strings.Contains(v.Detail, "provider link, which its pings check, healed") {
		t.Errorf("violation %q, want it to count from the link's heal", v.Detail)
	}
}
