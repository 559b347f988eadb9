package nodestatustest

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/reconkit/reconkit/nodestatus"
)

// Provider is a fake NodeProvider. Its zero value pings successfully and
// never notifies; use NewProvider to start from a node.
type Provider struct {
	mu      sync.Mutex
	node    *corev1.Node
	pingErr error
	hang    bool
	pings   int
	pinged  chan struct{} // closed at the next Ping
	cbs     []func(*corev1.Node)
}

var _ nodestatus.NodeProvider = (*Provider)(nil)

// NewProvider returns a provider whose status starts as node's (copied).
func NewProvider(node *corev1.Node) *Provider {
	return &Provider{node: node.DeepCopy()}
}

// Ping counts the call and returns the error set by SetPingError. After
// SetPingHang(true) it blocks until ctx ends and returns ctx.Err().
func (p *Provider) Ping(ctx context.Context) error {
	p.mu.Lock()
	p.pings++
	err, hang := p.pingErr, p.hang
	if p.pinged != nil {
		close(p.pinged)
		p.pinged = nil
	}
	p.mu.Unlock()
	if hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return err
}

// NotifyNodeStatus records cb; SetStatus and UpdateStatus call it.
func (p *Provider) NotifyNodeStatus(_ context.Context, cb func(*corev1.Node)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cbs = append(p.cbs, cb)
}

// SetPingError makes later Pings return err (nil for success).
func (p *Provider) SetPingError(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pingErr = err
}

// SetPingHang makes later Pings block until their context ends.
func (p *Provider) SetPingHang(hang bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hang = hang
}

// Pings returns how many times Ping was called.
func (p *Provider) Pings() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pings
}

// WaitForPings waits until Ping has been called at least n times in all,
// or ctx ends (give it a deadline), and returns the count then.
func (p *Provider) WaitForPings(ctx context.Context, n int) (int, error) {
	for {
		p.mu.Lock()
		got := p.pings
		if got >= n {
			p.mu.Unlock()
			return got, nil
		}
		if p.pinged == nil {
			p.pinged = make(chan struct{})
		}
		ch := p.pinged
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return got, fmt.Errorf("nodestatustest: %d pings of %d: %w", got, n, ctx.Err())
		}
	}
}

// Node returns a copy of the current desired node (nil if none was set).
func (p *Provider) Node() *corev1.Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.node.DeepCopy()
}

// SetStatus replaces the desired node (labels, annotations, status) and
// notifies every callback.
func (p *Provider) SetStatus(n *corev1.Node) {
	p.mu.Lock()
	p.node = n.DeepCopy()
	cbs, cur := p.cbs, p.node.DeepCopy()
	p.mu.Unlock()
	for _, cb := range cbs {
		cb(cur)
	}
}

// UpdateStatus applies fn to the desired node (under the provider's lock,
// so concurrent updates do not lose each other) and notifies every callback.
func (p *Provider) UpdateStatus(fn func(*corev1.Node)) {
	p.mu.Lock()
	if p.node == nil {
		p.node = &corev1.Node{}
	}
	fn(p.node)
	cbs, cur := p.cbs, p.node.DeepCopy()
	p.mu.Unlock()
	for _, cb := range cbs {
		cb(cur)
	}
}
