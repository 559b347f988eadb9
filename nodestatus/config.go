package nodestatus

import (
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Defaults used when the corresponding Config field is zero.
const (
	// DefaultLeaseDuration is the lease duration the kubelet uses.
	DefaultLeaseDuration = 40 * time.Second
	// DefaultRenewJitter spreads renewals of many nodes like the kubelet's
	// lease controller: each wait is RenewInterval plus up to 4%.
	DefaultRenewJitter = 0.04
	// DefaultNodeMonitorGracePeriod is kube-controller-manager's default
	// --node-monitor-grace-period since 1.32 (it was 40s before); 1.37
	// keeps it. Set NodeMonitorGracePeriod to the cluster's value when it
	// differs.
	DefaultNodeMonitorGracePeriod = 50 * time.Second
	// DefaultPingInterval is how often the provider is pinged.
	DefaultPingInterval = 10 * time.Second
	// DefaultPingTimeout bounds one Ping; it is kept below the renew interval.
	DefaultPingTimeout = 5 * time.Second
	// DefaultStatusReportInterval is how often the status is written even
	// when nothing changed, like the kubelet's nodeStatusReportFrequency.
	DefaultStatusReportInterval = 5 * time.Minute
	// DefaultShutdownTimeout bounds the shutdown action (cordon or delete).
	DefaultShutdownTimeout = 10 * time.Second
	// DefaultLeaseNamespace is where node leases live.
	DefaultLeaseNamespace = corev1.NamespaceNodeLease
	// DefaultFieldManager names this controller in managedFields.
	DefaultFieldManager = "reconkit-nodestatus"
)

// Annotations this package owns on the Node.
const (
	// AnnotationLastApplied holds what the controller last wrote (labels,
	// annotations and status, without heartbeat times), the "original" of
	// the three-way status patch. It is validated when read.
	AnnotationLastApplied = "nodestatus.reconkit.io/last-applied"
	// AnnotationCordoned marks a node this controller made unschedulable
	// on shutdown; the next Run makes it schedulable again if the cordon
	// is still its own (its field manager alone owns spec.unschedulable),
	// and removes the mark either way. A node an administrator cordoned,
	// before or after (kubectl uncordon leaves the mark behind), stays
	// cordoned.
	AnnotationCordoned = "nodestatus.reconkit.io/cordoned"
)

// Reasons the controller sets on the Ready condition.
const (
	// ReasonReady is the Ready=True reason when the provider sets no Ready
	// condition of its own and pings succeed.
	ReasonReady = "NodeProviderReady"
	// ReasonPingFailed is the Ready=False reason after a failed Ping.
	ReasonPingFailed = "NodeProviderPingFailed"
	// ReasonNotReported is the reason of the conditions the controller
	// reports on the provider's behalf (see Config.DefaultConditions).
	ReasonNotReported = "NodeProviderDoesNotReport"
)

// StandardConditions returns the conditions the controller reports, with
// reason ReasonNotReported, where the provider's status has none of that
// type: MemoryPressure, DiskPressure and PIDPressure, all False, as the
// kubelet reports them on a healthy node. Without them, the node lifecycle
// controller, which sets every condition of a node whose heartbeat lapsed to
// Unknown, would leave them Unknown forever after an outage.
func StandardConditions() []corev1.NodeCondition {
	var out []corev1.NodeCondition
	for _, t := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		out = append(out, corev1.NodeCondition{
			Type:    t,
			Status:  corev1.ConditionFalse,
			Reason:  ReasonNotReported,
			Message: "the node provider does not report this condition",
		})
	}
	return out
}

// PingFailurePolicy says what a failed Ping does.
type PingFailurePolicy int

const (
	// PingFailureSetNotReady (the default) sets Ready=False with reason
	// ReasonPingFailed and the error as message; the lease keeps being
	// renewed, so the node stays reachable but is reported unhealthy.
	PingFailureSetNotReady PingFailurePolicy = iota
	// PingFailureStopHeartbeat stops renewing the lease (and heartbeat
	// status writes) while pings fail, so the node lifecycle controller
	// marks the node Unknown after its grace period. This is the original
	// virtual-kubelet behaviour.
	PingFailureStopHeartbeat
	// PingFailureIgnore only logs failed pings: the status and the
	// heartbeat are not affected.
	PingFailureIgnore
)

// ShutdownAction is what Run does to the Node when its context ends.
type ShutdownAction int

const (
	// ShutdownNone leaves the Node and its lease alone (the default); the
	// node lifecycle controller marks it Unknown once the lease lapses.
	ShutdownNone ShutdownAction = iota
	// ShutdownCordon marks the Node unschedulable and annotates it with
	// AnnotationCordoned; the next Run undoes both while the cordon is
	// still this controller's (see AnnotationCordoned).
	ShutdownCordon
	// ShutdownDelete deletes the Node (if its UID is still the one this
	// controller registered) and its lease.
	ShutdownDelete
)

// Config configures a NodeController. Client and Node are required; every
// other zero field takes its default.
type Config struct {
	// Client talks to the API server. Many controllers may share one
	// client; its rate limiter must then allow about 0.11 requests per
	// second per node (QPS) with default settings.
	Client kubernetes.Interface
	// LeaseClient renews the lease; nil means Client. Like the kubelet's
	// heartbeat client, a client of its own (with its own rate limiter and
	// connections) keeps a burst of status traffic from delaying the
	// heartbeat.
	LeaseClient kubernetes.Interface
	// Node is the node to register: its name, and the labels, annotations,
	// spec and status the provider's notifications are laid over (see
	// NodeProvider for the rule: nothing set here is dropped by a
	// notification). It is copied by New.
	Node *corev1.Node
	// Provider pings the backend and notifies status changes. Nil means
	// NaiveNodeProvider.
	Provider NodeProvider
	// Clock drives every timer and timestamp. Nil means the real clock.
	Clock clock.Clock
	// Rand seeds the jitter of every wait (renewals, status reports, the
	// retries of failed requests): New draws from it, on its caller's
	// goroutine, the seeds of one source for each of the controller's
	// goroutines, so that their draws do not depend on the order in which
	// they run. It returns values uniformly in [0, 1); nil means every
	// wait draws from math/rand/v2's global source. A seeded Rand gives
	// the same waits every time.
	Rand func() float64

	// LeaseDuration is the lease's spec.leaseDurationSeconds (whole
	// seconds, default 40s).
	LeaseDuration time.Duration
	// RenewInterval is the wait between lease renewals, before jitter.
	// Default LeaseDuration/4.
	RenewInterval time.Duration
	// RenewJitter adds up to RenewJitter*RenewInterval to each wait.
	// Zero means DefaultRenewJitter; negative means none.
	RenewJitter float64
	// NodeMonitorGracePeriod is the node lifecycle controller's grace
	// period the heartbeat must beat (default 50s, kube-controller-manager's
	// default). New rejects timings where one failed or hung renewal could
	// let it pass: the longest renew wait (RenewInterval with jitter), a
	// renewal that hangs for RequestTimeout, the first retry wait (at most
	// 240ms, jitter included) and a retry that takes up to RequestTimeout
	// must together fit in the grace period, and in LeaseDuration.
	NodeMonitorGracePeriod time.Duration
	// LeaseNamespace defaults to kube-node-lease.
	LeaseNamespace string
	// DisableLease heartbeats through status writes every RenewInterval
	// instead of a Lease. Without it, the controller falls back to that
	// mode by itself where the Lease API does not exist.
	DisableLease bool

	// PingInterval is the wait between two Pings (default 10s).
	PingInterval time.Duration
	// PingTimeout bounds one Ping (default 5s, must be below PingInterval
	// and RenewInterval).
	PingTimeout time.Duration
	// PingFailure says what a failed Ping does (default
	// PingFailureSetNotReady).
	PingFailure PingFailurePolicy

	// StatusReportInterval is the time between two status writes when
	// nothing changes (default 5m), counted from the end of the previous
	// write. The first report after registration comes after a random half
	// to whole interval, to spread nodes started together.
	StatusReportInterval time.Duration
	// RequestTimeout bounds each API request (default RenewInterval). It
	// counts in the timing check described at NodeMonitorGracePeriod.
	RequestTimeout time.Duration

	// DefaultConditions are reported where the provider's status has no
	// condition of that type, so that the node lifecycle controller's
	// Unknown does not stay forever on conditions nobody reports. Nil means
	// StandardConditions(); an empty, non-nil slice reports none. Their
	// times are set by the controller.
	DefaultConditions []corev1.NodeCondition

	// Limiter, shared by the controllers of one process, bounds how many of
	// them write their Node at once; nil means no bound. A controller
	// holds one unit from the start of Run until its registration's first
	// attempt ends (nothing is started before: no goroutine, no request),
	// and one for each later status attempt (a GET and a PATCH), never
	// across a retry wait. Lease renewals and the shutdown action never
	// wait for it, so a burst of status traffic cannot delay a heartbeat.
	// A process that starts hundreds of nodes together should share one:
	// see Limiter.
	Limiter Limiter

	// ErrorHandler sees every failed API request; nil logs and retries.
	ErrorHandler ErrorHandler
	// Metrics receives every API request's outcome, HTTP code and
	// duration, and every ping's; nil means none.
	Metrics Metrics
	// Events receives the Events the controller emits about its Node
	// (registration, re-registration, a rejected status); nil means none.
	Events EventRecorder
	// ReRegister creates the Node again when someone else deleted it.
	// It is off by default: the cloud node-lifecycle controller deletes
	// NotReady nodes whose instance it cannot find, and a controller that
	// re-registers fights it (virtual-kubelet made re-registration opt-in
	// for that reason). Off, Run returns an error wrapping ErrNodeDeleted.
	// The Node is always created at start when it does not exist.
	ReRegister bool
	// OnShutdown is what happens to the Node when Run's context ends.
	OnShutdown ShutdownAction
	// ShutdownTimeout bounds OnShutdown (default 10s).
	ShutdownTimeout time.Duration
	// FieldManager names this controller in managedFields (default
	// "reconkit-nodestatus").
	FieldManager string
}

// ErrInvalidConfig is wrapped by New's errors.
var ErrInvalidConfig = errors.New("nodestatus: invalid config")

func (c *Config) fill() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.Client == nil {
		bad("Client is nil")
	}
	if c.Node == nil {
		bad("Node is nil")
	} else {
		if c.Node.Name == "" {
			bad("Node has no name")
		} else if msgs := validation.IsDNS1123Subdomain(c.Node.Name); len(msgs) > 0 {
			bad("Node name %q: %v", c.Node.Name, msgs)
		}
		c.Node = c.Node.DeepCopy()
	}
	if c.Provider == nil {
		c.Provider = NaiveNodeProvider{}
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	def := func(d *time.Duration, v time.Duration, name string) {
		if *d == 0 {
			*d = v
		} else if *d < 0 {
			bad("%s %v is negative", name, *d)
		}
	}
	def(&c.LeaseDuration, DefaultLeaseDuration, "LeaseDuration")
	if c.LeaseDuration > 0 && c.LeaseDuration%time.Second != 0 {
		bad("LeaseDuration %v is not a whole number of seconds", c.LeaseDuration)
	}
	def(&c.RenewInterval, c.LeaseDuration/4, "RenewInterval")
	switch {
	case c.RenewJitter == 0:
		c.RenewJitter = DefaultRenewJitter
	case c.RenewJitter < 0:
		c.RenewJitter = 0
	case c.RenewJitter > 1:
		bad("RenewJitter %v is above 1", c.RenewJitter)
	}
	def(&c.NodeMonitorGracePeriod, DefaultNodeMonitorGracePeriod, "NodeMonitorGracePeriod")
	def(&c.RequestTimeout, c.RenewInterval, "RequestTimeout")
	worst := time.Duration(float64(c.RenewInterval) * (1 + c.RenewJitter))
	if c.RenewInterval > 0 && worst >= c.LeaseDuration {
		bad("RenewInterval %v (up to %v with jitter) does not beat LeaseDuration %v", c.RenewInterval, worst, c.LeaseDuration)
	}
	// One renewal that hangs until RequestTimeout, the first retry wait,
	// and a retry that succeeds just before its own timeout.
	gap := worst + 2*c.RequestTimeout + retryFirstMax
	if c.RenewInterval > 0 && c.RequestTimeout > 0 {
		if gap > c.NodeMonitorGracePeriod {
			bad("RenewInterval %v (up to %v with jitter) and RequestTimeout %v: one hung renewal and its retry can leave %v between heartbeats, above the node-monitor grace period %v", c.RenewInterval, worst, c.RequestTimeout, gap, c.NodeMonitorGracePeriod)
		}
		if gap > c.LeaseDuration {
			bad("RenewInterval %v (up to %v with jitter) and RequestTimeout %v: one hung renewal and its retry can leave %v between heartbeats, above LeaseDuration %v", c.RenewInterval, worst, c.RequestTimeout, gap, c.LeaseDuration)
		}
	}
	if c.LeaseNamespace == "" {
		c.LeaseNamespace = DefaultLeaseNamespace
	}
	def(&c.PingInterval, DefaultPingInterval, "PingInterval")
	def(&c.PingTimeout, min(DefaultPingTimeout, c.RenewInterval/2, c.PingInterval/2), "PingTimeout")
	if c.PingTimeout >= c.PingInterval {
		bad("PingTimeout %v must be below PingInterval %v", c.PingTimeout, c.PingInterval)
	}
	if c.PingTimeout >= c.RenewInterval {
		bad("PingTimeout %v must be below RenewInterval %v", c.PingTimeout, c.RenewInterval)
	}
	if c.PingFailure < PingFailureSetNotReady || c.PingFailure > PingFailureIgnore {
		bad("unknown PingFailure %d", c.PingFailure)
	}
	def(&c.StatusReportInterval, DefaultStatusReportInterval, "StatusReportInterval")
	if c.LeaseClient == nil {
		c.LeaseClient = c.Client
	}
	// Nil stays nil, meaning StandardConditions(), built at each write
	// rather than held by every controller.
	c.DefaultConditions = slices.Clone(c.DefaultConditions)
	seen := map[corev1.NodeConditionType]bool{}
	for _, d := range c.DefaultConditions {
		if d.Type == "" || seen[d.Type] {
			bad("DefaultConditions: empty or repeated type %q", d.Type)
		}
		seen[d.Type] = true
	}
	if c.OnShutdown < ShutdownNone || c.OnShutdown > ShutdownDelete {
		bad("unknown OnShutdown %d", c.OnShutdown)
	}
	def(&c.ShutdownTimeout, DefaultShutdownTimeout, "ShutdownTimeout")
	if c.FieldManager == "" {
		c.FieldManager = DefaultFieldManager
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"RenewInterval", c.RenewInterval}, {"PingInterval", c.PingInterval}, {"StatusReportInterval", c.StatusReportInterval}} {
		if d.v > 0 && d.v < time.Millisecond {
			bad("%s %v is below a millisecond", d.name, d.v)
		}
	}
	return errors.Join(errs...)
}
