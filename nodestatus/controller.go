package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/internal/jitter"
)

// ErrAlreadyStarted is returned by a second call to Run.
var ErrAlreadyStarted = errors.New("nodestatus: Run called twice")

// NodeController registers a Node, keeps its Lease renewed and its status in
// step with a NodeProvider. Create it with New and start it with Run.
type NodeController struct {
	cfg       Config
	name      string
	clk       clock.Clock
	patchMeta strategicpatch.LookupPatchMeta
	// rand is a source of its own for Run's loop and for the retries of
	// the lease and of the status (by retryLease, retryStatus), each on a
	// goroutine of its own: split from Config.Rand in New, nil without it.
	rand struct {
		run   func() float64
		retry [2]func() float64
	}

	metrics Metrics
	events  EventRecorder

	base   *packedNode                // Config.Node
	latest atomic.Pointer[packedNode] // base with the provider's newest node laid over it
	ping   atomic.Pointer[pingState]  // the newest ping result, set by Run's loop
	notify chan struct{}              // capacity 1: "latest changed"

	// probe, when set before Run, lets a test ask the loop, between two
	// events, whether it is quiet and whether a ping is running (see
	// probeReply). Nil otherwise: a select never takes a nil channel.
	probe chan chan probeReply
	// jobs is what quiet reports on.
	jobs jobState

	started atomic.Bool
	// runStart and lastBeat are when Run started and when the last
	// heartbeat succeeded, on the controller's clock (nil before), for
	// HeartbeatCheck and LastHeartbeat.
	runStart atomic.Pointer[time.Time]
	lastBeat atomic.Pointer[time.Time]
	renewal  atomic.Pointer[leaseRenewal] // see LeaseRenewal
	ready    chan struct{}
	done     chan struct{}
	err      error // written before done is closed
}

// New checks cfg, fills its defaults and returns a controller. It has no
// side effects: nothing is sent to the API server before Run.
func New(cfg Config) (*NodeController, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	meta, err := nodePatchMeta()
	if err != nil {
		return nil, fmt.Errorf("nodestatus: node patch schema: %w", err)
	}
	c := &NodeController{
		cfg:       cfg,
		name:      cfg.Node.Name,
		clk:       cfg.Clock,
		patchMeta: meta,
		metrics:   cfg.Metrics,
		notify:    make(chan struct{}, 1),
		ready:     make(chan struct{}),
		done:      make(chan struct{}),
	}
	c.rand.run, c.rand.retry[retryLease], c.rand.retry[retryStatus] = jitter.Split(cfg.Rand), jitter.Split(cfg.Rand), jitter.Split(cfg.Rand)
	if c.metrics == nil {
		c.metrics = noMetrics{}
	}
	c.events = cfg.Events
	if c.events == nil {
		c.events = noEvents{}
	}
	c.base = packNode(cfg.Node, true)
	c.cfg.Node = nil // kept encoded in base
	c.latest.Store(c.base)
	c.ping.Store(&pingState{})
	return c, nil
}

// Ready is closed once the Node is registered and its first heartbeat (lease
// renewal, or status write without leases) has succeeded. It is never closed
// if Run fails before that.
func (c *NodeController) Ready() <-chan struct{} { return c.ready }

// Done is closed when Run has returned.
func (c *NodeController) Done() <-chan struct{} { return c.done }

// Err returns Run's result once Done is closed, and nil before.
func (c *NodeController) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// notifyStatus is the callback handed to the provider: it never blocks.
func (c *NodeController) notifyStatus(n *corev1.Node) {
	if n == nil {
		return
	}
	base := c.base.unpack()
	if base == nil {
		base = &corev1.Node{} // cannot happen: packNode encoded it
	}
	c.latest.Store(packNode(overlay(base, n), true))
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

func (c *NodeController) log(ctx context.Context) logr.Logger {
	return logr.FromContextOrDiscard(ctx)
}

// Run registers the Node, then renews its lease and writes its status until
// ctx ends. It blocks until every goroutine it started has returned (Ping
// must honour its context), then performs Config.OnShutdown, and returns
// nil: the end of ctx is a clean stop. It returns a wrapped error for a real
// failure only: when the ErrorHandler gives up, when the Node was deleted
// and Config.ReRegister is off (ErrNodeDeleted), or when the shutdown
// action fails. A status the API server rejects does not stop it (see
// ErrRejected). Run may be called once.
func (c *NodeController) Run(ctx context.Context) (err error) {
	if !c.started.CompareAndSwap(false, true) {
		return ErrAlreadyStarted
	}
	start := c.clk.Now()
	c.runStart.Store(&start)
	defer c.finished(&err)
	// A shared limiter's unit is taken before anything starts, and handed
	// to the registration's first attempt, which returns it.
	if l := c.cfg.Limiter; l != nil {
		if l.Acquire(ctx, 1) != nil {
			return nil // ctx ended: nothing was started
		}
	}
	// Run's own frame stays small: the goroutine sits in it, and in loop,
	// between events, and its stack is sized by what it holds then.
	r := c.newRunner(ctx)
	return r.stop(r.loop())
}

// finished publishes Run's result.
func (c *NodeController) finished(err *error) {
	c.err = *err
	close(c.done)
}
