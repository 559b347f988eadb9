package fleetsim

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/checkpointtest"
	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
	"github.com/reconkit/reconkit/versiongate"
)

// Agent runs one agent of the fleet until ctx ends, as a host's main runs
// it; it returns nil then. The simulator calls it again, with the same disk,
// after every crash.
type Agent func(ctx context.Context, d Deps) error

// Deps is what one run of one agent gets from the world. ctx carries a
// logger (logr.FromContextOrDiscard) named after the agent.
type Deps struct {
	Name  string // "agent-0", "agent-1", ...: a Node name, a Lease identity
	Index int    // the agent's place in the fleet, from 0
	IP    string // "10.0.0.<Index+1>"
	Boot  int    // how many runs of this agent came before this one

	// Kube is this run's own client of the one apiserver: a partition or a
	// crash cuts it alone. A restarted agent gets a new client.
	Kube *kubefake.Client
	// Engine is this run's link to the one provider: writes pass its fence
	// (lbrecon.Guard with the world's lbrecon.Fence), and a partition or a
	// crash cuts the link alone.
	Engine lbrecon.Engine
	// FS is the agent's disk; it keeps across a crash only what was
	// synced. Dir is a durable directory on it for the agent's state.
	FS  *checkpointtest.StrictFS
	Dir string
	// Clock is the agent's clock: simulated time, at a rate of its own
	// once ClockDrift changed it (within Nemesis.MaxDrift). Only what the
	// host gives it to (the Clock fields of reconkit's Configs) drifts;
	// the rest of the agent runs on simulated time.
	Clock clock.WithTicker
	// Release is the release this run runs: Config.Gate's first, or a
	// later one after a RollingUpgrade; the zero Version without
	// Config.Gate.Releases.
	Release versiongate.Version
	// Serving is called by a host that has a version gate whenever this
	// run starts or stops serving (passed WaitReady; lost its record): the
	// world checks NoIncompatibleServing by it. Calls after the run ended
	// are ignored.
	Serving func(serving bool)
	// Checkpoints wraps the run's checkpoint store (checkpoint.Config.Store)
	// so that the world writes its records to the timeline and checks
	// LKGProven.
	Checkpoints func(checkpoint.LKGStore) checkpoint.LKGStore
	// Ping is the health of the agent's backend as the world models it,
	// for a NodeProvider's Ping (nodestatus.ProviderConfig.Ping): it fails
	// with ErrUnreachable while the nemesis cuts this run's provider link.
	// A run that pings stops its Node's heartbeats while it fails
	// (nodestatus.PingFailureStopHeartbeat), so NodeReady counts its bound
	// from whichever came later, the client reaching the apiserver again
	// or the link's heal, and not while the link is cut.
	Ping func(context.Context) error
	// Checkpoint is, in the Deps given to Config.Converged only, the latest
	// record the agent's checkpoint store read or wrote through
	// Checkpoints (the zero State without): a host whose agents stay out
	// of the load balancer while their assigned configuration is refused
	// expects them out by it.
	Checkpoint checkpoint.State
}

// Config describes a fleet and the world it runs in. Agent is required;
// every other field has a default.
type Config struct {
	// Seed draws every choice of the nemesis; the same seed and Config give
	// the same schedule of faults. 0 means 1.
	Seed uint64
	// Agents is the fleet's size; 0 means 3.
	Agents int
	// Agent runs one agent.
	Agent Agent
	// Objects are in the apiserver when the run starts.
	Objects []runtime.Object
	// Kube configures the apiserver; its Clock is set to the real clock
	// (simulated time) when nil. When its UntrackedFields is nil, Leases
	// keep no managedFields (kubefake.Config.UntrackedFields): an agent
	// that reads a Lease's managedFields or applies Leases server-side
	// sets it to an empty slice, and every resource is tracked.
	Kube kubefake.Config
	// Provider configures the provider; its Clock is set to the real clock
	// when nil, and its Seed is drawn from the run's Seed when 0.
	Provider lbrecontest.Config
	// Tag marks the provider objects the agents own. When set, no object
	// may be left untagged and no two tagged objects may share a kind and
	// a name once the quiet period has converged.
	Tag string
	// Converged returns, for the fleet (each agent's latest Deps, Kube and
	// Engine left out, Checkpoint set), the condition the provider's
	// objects meet once the fleet has converged; nil means the provider is
	// not judged (see lbrecontest.Converged). It is called again at every
	// change of the provider during the quiet period, with the fleet as it
	// is then.
	Converged func(fleet []Deps) func([]lbrecon.Object) bool
	// Duration is how long the nemesis acts, in simulated time; 0 means
	// 30 minutes.
	Duration time.Duration
	// Quiet is the time allowed after the nemesis stopped, every fault
	// undone and every agent running, for the fleet to converge; 0 means
	// 10 minutes.
	Quiet time.Duration
	// Nemesis chooses the faults.
	Nemesis Nemesis
	// Budget bounds each agent's requests.
	Budget Budget
	// StopTimeout is how long an agent's Run may take to return once its
	// context ended; 0 means one minute.
	StopTimeout time.Duration
	// Logger is given, named after each agent, to the agents' contexts; the
	// zero value writes the agents' info and error logs (V(0)) to the
	// timeline.
	Logger logr.Logger
	// LogVerbosity is the verbosity of the agents' logs in the timeline
	// when Logger is the zero value: 0 keeps info and errors, 1 adds
	// reconkit's retries and plans.
	LogVerbosity int
	// CheckpointTrial is the agents' checkpoint trial duration
	// (checkpoint.Config.TrialDuration), which LKGProven holds every
	// last-known-good configuration to; 0 means checkpoint's default,
	// negative turns the check off (for hosts that confirm by hand).
	CheckpointTrial time.Duration
	// Nodes describes the agents' Nodes (NodeReady).
	Nodes Nodes
	// Gate describes the agents' releases (NoIncompatibleServing,
	// RollingUpgrade).
	Gate Gate
	// Start is the simulated wall-clock time the run begins at, when it is
	// later than the bubble's own start (midnight UTC, 1 January 2000).
	// Test sets it to the start of the current UTC day (see the package
	// documentation on HandleError).
	Start time.Time
}

// Budget bounds the requests one agent sends. Every loop that meets the
// same answer for ever must fall to about one request per second (the
// project's request-budget rule); a loop that spins sends many requests
// without simulated time passing.
type Budget struct {
	// PerMinute is the most requests one run of an agent may send to the
	// apiserver, and the most calls it may make to the provider, in any
	// minute of simulated time; 0 means 600.
	PerMinute int
	// AtOnce is the most it may send at one instant of simulated time;
	// 0 means 200.
	AtOnce int
	// PerKind is the most apiserver requests of one kind (one verb on one
	// resource and subresource, with one name or one set of selectors:
	// what one loop sends; a create's or an update's name is the object's)
	// one run may send in any
	// minute; 0 means 120. A loop that meets the same answer for ever and
	// retries it at most once a second after 30 s (faster at first, its
	// pause doubling from 100ms) stays within it; one that retries every
	// 100ms sends 600, and exceeds it after 12 s.
	PerKind int
}

// Edit is an operator's edit of the host's objects, such as a bad ConfigMap.
type Edit struct {
	Name string
	// Do makes the edit.
	Do func(ctx context.Context, c kubernetes.Interface) error
	// Undo, when set, puts things right again, a while after Do and at the
	// latest when the quiet period begins.
	Undo func(ctx context.Context, c kubernetes.Interface) error
}

func (c Config) withDefaults() Config {
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Agents == 0 {
		c.Agents = 3
	}
	if c.Duration == 0 {
		c.Duration = 30 * time.Minute
	}
	if c.Quiet == 0 {
		c.Quiet = 10 * time.Minute
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = time.Minute
	}
	if c.Budget.PerMinute == 0 {
		c.Budget.PerMinute = 600
	}
	if c.Budget.AtOnce == 0 {
		c.Budget.AtOnce = 200
	}
	if c.Budget.PerKind == 0 {
		c.Budget.PerKind = 120
	}
	if c.Kube.Clock == nil {
		c.Kube.Clock = clock.RealClock{}
	}
	if c.Kube.UntrackedFields == nil {
		// Leases are most of a fleet's writes, and no agent reads their
		// managedFields; their field manager was half of a fleet's cost.
		c.Kube.UntrackedFields = []schema.GroupResource{{Group: "coordination.k8s.io", Resource: "leases"}}
	}
	if c.Provider.Clock == nil {
		c.Provider.Clock = clock.RealClock{}
	}
	if c.CheckpointTrial == 0 {
		c.CheckpointTrial = checkpoint.DefaultTrialDuration
	}
	if c.Nodes.Grace == 0 {
		c.Nodes.Grace = 40 * time.Second
	}
	if c.Nodes.Within == 0 {
		c.Nodes.Within = 30 * time.Second
	}
	c.Nemesis = c.Nemesis.withDefaults()
	return c
}
