package main

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/nodestatus"
)

// agentProvider is the agent's nodestatus.NodeProvider: it publishes the
// ConfigOK condition from checkpoint and the VersionGateReady condition
// from versiongate on the agent's Node.
type agentProvider struct {
	mu   sync.Mutex
	node *corev1.Node
	cb   func(*corev1.Node)
}

var _ nodestatus.NodeProvider = (*agentProvider)(nil)

func newAgentProvider(node *corev1.Node) *agentProvider {
	return &agentProvider{node: node.DeepCopy()}
}

// Ping reports the backend healthy; the agent's health is judged by the
// configuration trial instead.
func (p *agentProvider) Ping(ctx context.Context) error { return ctx.Err() }

// NotifyNodeStatus keeps cb and hands it the current node.
func (p *agentProvider) NotifyNodeStatus(_ context.Context, cb func(*corev1.Node)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cb = cb
	cb(p.node.DeepCopy())
}

// setCondition replaces the condition of c's type and notifies the
// controller when something other than timestamps changed.
func (p *agentProvider) setCondition(c corev1.NodeCondition) {
	p.mu.Lock()
	defer p.mu.Unlock()
	conds := p.node.Status.Conditions
	for i := range conds {
		if conds[i].Type != c.Type {
			continue
		}
		old := conds[i]
		if old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message {
			return
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		conds[i] = c
		p.notifyLocked()
		return
	}
	p.node.Status.Conditions = append(conds, c)
	p.notifyLocked()
}

func (p *agentProvider) notifyLocked() {
	if p.cb != nil {
		p.cb(p.node.DeepCopy())
	}
}

func gatedCondition(ready bool, reason, msg string) corev1.NodeCondition {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	now := metav1.Now()
	return corev1.NodeCondition{Type: conditionGated, Status: st, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
}
