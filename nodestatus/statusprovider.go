package nodestatus

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// DefaultCoalesce is how long a Provider gathers changes before it notifies.
const DefaultCoalesce = 100 * time.Millisecond

// ProviderConfig configures a Provider. Every field is optional.
type ProviderConfig struct {
	// Ping reports whether the node's backend is healthy (see
	// NodeProvider.Ping). Nil means healthy.
	Ping func(ctx context.Context) error
	// Clock times the coalescing and the conditions' transition times.
	// Nil means the real clock.
	Clock clock.WithDelayedExecution
	// Coalesce is how long the provider waits after a change before it
	// notifies, so that a burst of changes becomes one notification; the
	// wait starts at the first change not sent yet, so a steady stream of
	// changes is sent every Coalesce.
	// Zero means DefaultCoalesce; negative means every change notifies at
	// once: the method that made the change calls the callbacks before it
	// returns, except a callback that another method is calling at that
	// moment, or that made the change itself from inside its call; that
	// other method sends it the change as soon as the callback's current
	// call returns, and returns only then.
	Coalesce time.Duration
}

// Provider is a NodeProvider a host drives by setting the node's status
// piece by piece: conditions, addresses, capacity, nodeInfo, labels and
// annotations. A change and those made within Coalesce after it are sent
// to the controller as one notification, Coalesce after that first change,
// carrying everything set so far. What it
// does not set is taken from Config.Node (see NodeProvider for how the two
// combine). It is safe for concurrent use, and its methods never block on
// the controller.
//
// Its ReportCondition method is what checkpoint.Config's Conditions field
// takes, so a checkpoint controller's ConfigOK condition reaches the Node
// with no code of the host's.
//
// Each callback is called once at a time, and is sent nodes in the order
// they were taken: never an older node after a newer one, so the last one
// it got carries every change sent so far. A callback may call the
// Provider's methods; a change it makes is sent to it after its current
// call returns, never during it.
//
// A Provider serves one NodeController at a time; a notification timer
// still pending when that controller's Run ends may deliver once more to
// it, which the controller ignores.
type Provider struct {
	ping     func(ctx context.Context) error
	clk      clock.WithDelayedExecution
	coalesce time.Duration

	mu      sync.Mutex
	node    corev1.Node // labels, annotations and status only
	cbs     []*callback
	pending clock.Timer // armed while a notification is pending
	changed bool        // something was set: a new callback is sent it
}

// callback is a registered callback and what is still to be sent to it.
// Its fields are guarded by the Provider's mu.
type callback struct {
	fn func(*corev1.Node)
	// next is the newest node not yet sent to fn, or nil. A newer node
	// replaces an older one not yet sent, which is then never sent.
	next *corev1.Node
	// busy is set while a goroutine is sending to fn: only that goroutine
	// calls fn, one node after the other, until next is nil.
	busy bool
}

var _ NodeProvider = (*Provider)(nil)

// NewProvider returns a Provider with an empty status: until it is told
// otherwise, the node's status is Config.Node's.
func NewProvider(cfg ProviderConfig) *Provider {
	p := &Provider{ping: cfg.Ping, clk: cfg.Clock, coalesce: cfg.Coalesce}
	if p.clk == nil {
		p.clk = clock.RealClock{}
	}
	if p.coalesce == 0 {
		p.coalesce = DefaultCoalesce
	}
	return p
}

// Ping calls ProviderConfig.Ping, or returns ctx.Err() when there is none.
func (p *Provider) Ping(ctx context.Context) error {
	if p.ping == nil {
		return ctx.Err()
	}
	return p.ping(ctx)
}

// NotifyNodeStatus registers cb until ctx ends, and sends it what was set
// so far, if anything; a change made meanwhile may be sent to it instead,
// never before it.
func (p *Provider) NotifyNodeStatus(ctx context.Context, cb func(*corev1.Node)) {
	c := &callback{fn: cb}
	p.mu.Lock()
	p.cbs = append(p.cbs, c)
	if p.changed {
		c.next = p.snapshotLocked()
	}
	p.mu.Unlock()
	context.AfterFunc(ctx, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.cbs = slices.DeleteFunc(p.cbs, func(x *callback) bool { return x == c })
		c.next = nil // a delivery under way sends it nothing more
		if len(p.cbs) == 0 && p.pending != nil {
			p.pending.Stop()
			p.pending = nil
		}
	})
	p.send(c)
}

// ReportCondition sets the condition of type conditionType to status
// ("True", "False" or "Unknown"), reason and message, replacing any earlier
// one of that type. Its LastTransitionTime moves only when its status
// changes; on its first report it is left to the controller, which keeps
// the served Node's time when the status there is the same.
//
// It is the method checkpoint calls through its own interface:
//
//	checkpoint.Config[T]{..., Conditions: provider}
func (p *Provider) ReportCondition(conditionType, status, reason, message string) {
	p.SetCondition(corev1.NodeCondition{
		Type:    corev1.NodeConditionType(conditionType),
		Status:  corev1.ConditionStatus(status),
		Reason:  reason,
		Message: message,
	})
}

// SetCondition sets c, replacing the condition of its type. Heartbeat times
// are the controller's; LastTransitionTime follows ReportCondition's rule
// unless c sets one. Setting what is already there notifies nothing.
func (p *Provider) SetCondition(c corev1.NodeCondition) {
	c.LastHeartbeatTime = metav1.Time{}
	p.update(func(n *corev1.Node) bool {
		conds := n.Status.Conditions
		i := slices.IndexFunc(conds, func(x corev1.NodeCondition) bool { return x.Type == c.Type })
		if i < 0 {
			n.Status.Conditions = append(conds, c)
			return true
		}
		old := conds[i]
		if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = old.LastTransitionTime
			if old.Status != c.Status {
				c.LastTransitionTime = metav1.NewTime(p.clk.Now()).Rfc3339Copy()
			}
		}
		if old == c {
			return false
		}
		conds[i] = c
		return true
	})
}

// RemoveCondition removes the condition of type t. One set in Config.Node
// stays (see NodeProvider).
func (p *Provider) RemoveCondition(t corev1.NodeConditionType) {
	p.update(func(n *corev1.Node) bool {
		before := len(n.Status.Conditions)
		n.Status.Conditions = slices.DeleteFunc(n.Status.Conditions, func(x corev1.NodeCondition) bool { return x.Type == t })
		return len(n.Status.Conditions) != before
	})
}

// SetAddresses sets the node's addresses. For each address type listed,
// they replace Config.Node's addresses of that type.
func (p *Provider) SetAddresses(addrs ...corev1.NodeAddress) {
	addrs = slices.Clone(addrs)
	p.update(func(n *corev1.Node) bool {
		if slices.Equal(n.Status.Addresses, addrs) {
			return false
		}
		n.Status.Addresses = addrs
		return true
	})
}

// SetCapacity sets the node's capacity and allocatable resources; a nil
// list leaves that one as it was.
func (p *Provider) SetCapacity(capacity, allocatable corev1.ResourceList) {
	p.update(func(n *corev1.Node) bool {
		if capacity != nil {
			n.Status.Capacity = capacity.DeepCopy()
		}
		if allocatable != nil {
			n.Status.Allocatable = allocatable.DeepCopy()
		}
		return capacity != nil || allocatable != nil
	})
}

// SetNodeInfo sets the node's system info; empty fields are not written
// (see Config.Node).
func (p *Provider) SetNodeInfo(info corev1.NodeSystemInfo) {
	p.update(func(n *corev1.Node) bool {
		if n.Status.NodeInfo == info {
			return false
		}
		n.Status.NodeInfo = info
		return true
	})
}

// Update applies fn to the provider's node (labels, annotations and
// status; anything else is ignored) under the provider's lock: several
// changes made together are one notification.
func (p *Provider) Update(fn func(*corev1.Node)) {
	p.update(func(n *corev1.Node) bool {
		fn(n)
		return true
	})
}

// Node returns a copy of what the provider has been told so far.
func (p *Provider) Node() *corev1.Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.node.DeepCopy()
}

// Flush sends a pending notification now instead of at the end of the
// coalescing wait; to a callback that another method is calling at that
// moment, that method sends it as soon as the callback's call returns.
func (p *Provider) Flush() {
	p.mu.Lock()
	if p.pending == nil {
		p.mu.Unlock()
		return
	}
	p.pending.Stop()
	p.deliverLocked()
}

// update applies fn under the lock and, if it changed something, arranges
// a notification.
func (p *Provider) update(fn func(*corev1.Node) bool) {
	p.mu.Lock()
	if !fn(&p.node) {
		p.mu.Unlock()
		return
	}
	p.changed = true
	if p.coalesce < 0 {
		p.deliverLocked()
		return
	}
	if p.pending == nil && len(p.cbs) > 0 {
		var t clock.Timer
		t = p.clk.AfterFunc(p.coalesce, func() {
			p.mu.Lock()
			if p.pending != t {
				p.mu.Unlock() // flushed or stopped meanwhile
				return
			}
			p.deliverLocked()
		})
		p.pending = t
	}
	p.mu.Unlock()
}

// deliverLocked sends the node to every callback; it is called with p.mu
// held and releases it. The node becomes every callback's next under the
// lock, so a later snapshot always replaces an earlier one; a callback
// some other goroutine is sending to gets it from that goroutine.
func (p *Provider) deliverLocked() {
	p.pending = nil
	n := p.snapshotLocked()
	cbs := slices.Clone(p.cbs)
	for _, c := range cbs {
		c.next = n
	}
	p.mu.Unlock()
	for _, c := range cbs {
		p.send(c)
	}
}

// snapshotLocked returns a copy of what a callback is sent: the node's
// labels, annotations and status. It is called with p.mu held.
func (p *Provider) snapshotLocked() *corev1.Node {
	n := p.node.DeepCopy()
	n.Spec, n.OwnerReferences, n.ManagedFields = corev1.NodeSpec{}, nil, nil
	return n
}

// send calls c with its next node, and again while a newer one came
// meanwhile, unless another goroutine is already doing so: that one sends
// what is new. It is called without p.mu, and calls c without it, so that
// c may call the Provider; a call made from inside c finds c busy and
// leaves its change to the loop below.
func (p *Provider) send(c *callback) {
	p.mu.Lock()
	if c.busy {
		p.mu.Unlock()
		return
	}
	c.busy = true
	locked := true
	defer func() {
		// Also when c panics: a later change is sent to it again.
		if !locked {
			p.mu.Lock()
		}
		c.busy = false
		p.mu.Unlock()
	}()
	for c.next != nil {
		n := c.next
		c.next = nil
		p.mu.Unlock()
		locked = false
		c.fn(n)
		p.mu.Lock()
		locked = true
	}
}
