package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
	"github.com/reconkit/reconkit/versiongate"
)

// The label marking the Nodes of this program.
const (
	nodeLabel      = "reconkit.io/nodeagent"
	conditionGated = "VersionGateReady"
	ownerTag       = "owner=nodeagent"
)

// httpsRelease is the first release whose load balancer also forwards
// https: nodes below it do not listen on the https node port, so the
// state it reconciles is incompatible with them.
var httpsRelease = versiongate.Release{Major: 1, Minor: 1}

var httpsPort = portConfig{Name: "https", NodePort: 30443, ExternalPort: 443}

// releasePorts are the ports a release adds to the configured ones.
func releasePorts(r versiongate.Release) []portConfig {
	if r.Less(httpsRelease) {
		return nil
	}
	return []portConfig{httpsPort}
}

// minimumCompatible is the lowest node release that can serve on the load
// balancer release r reconciles.
func minimumCompatible(r versiongate.Release) versiongate.Release {
	if r.Less(httpsRelease) {
		return versiongate.Release{Major: 1}
	}
	return httpsRelease
}

// errFenced is returned for a write carrying a token below the highest the
// load balancer has seen: a deposed leader's late write.
var errFenced = errors.New("load balancer: fencing token is stale")

// fence is the load balancer's memory of the highest fencing token that
// wrote to it, as a provider supporting conditional writes would keep.
type fence struct {
	mu      sync.Mutex
	highest uint64
	refused int
}

func (f *fence) admit(token uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if token < f.highest {
		f.refused++
		return backoff.Permanent(fmt.Errorf("%w: token %d, highest seen %d", errFenced, token, f.highest))
	}
	f.highest = token
	return nil
}

func (f *fence) state() (highest uint64, refused int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.highest, f.refused
}

// fencedEngine passes one term's fencing token with every write.
type fencedEngine struct {
	*lbrecontest.Engine
	fence *fence
	token uint64
}

var (
	_ lbrecon.Engine   = (*fencedEngine)(nil)
	_ lbrecon.Repairer = (*fencedEngine)(nil)
	_ lbrecon.Updater  = (*fencedEngine)(nil)
)

func (e *fencedEngine) Create(ctx context.Context, o lbrecon.Object) (lbrecon.Object, error) {
	if err := e.fence.admit(e.token); err != nil {
		return lbrecon.Object{}, err
	}
	return e.Engine.Create(ctx, o)
}

func (e *fencedEngine) Destroy(ctx context.Context, o lbrecon.Object) error {
	if err := e.fence.admit(e.token); err != nil {
		return err
	}
	return e.Engine.Destroy(ctx, o)
}

func (e *fencedEngine) Tag(ctx context.Context, o lbrecon.Object, tags []string) error {
	if err := e.fence.admit(e.token); err != nil {
		return err
	}
	return e.Engine.Tag(ctx, o, tags)
}

func (e *fencedEngine) Update(ctx context.Context, cur, desired lbrecon.Object) (lbrecon.Object, error) {
	if err := e.fence.admit(e.token); err != nil {
		return lbrecon.Object{}, err
	}
	return e.Engine.Update(ctx, cur, desired)
}

func (e *fencedEngine) Repair(ctx context.Context, o lbrecon.Object) (lbrecon.Object, error) {
	if err := e.fence.admit(e.token); err != nil {
		return lbrecon.Object{}, err
	}
	return e.Engine.Repair(ctx, o)
}

// liveTargets lists this program's Nodes whose heartbeat lease is fresh
// and whose Ready and VersionGateReady conditions are True: the nodes that
// can take traffic.
func liveTargets(ctx context.Context, kube kubernetes.Interface, now time.Time) ([]lbrecon.Target, error) {
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: nodeLabel})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var out []lbrecon.Target
	for _, n := range nodes.Items {
		if !conditionTrue(n.Status.Conditions, corev1.NodeReady) || !conditionTrue(n.Status.Conditions, conditionGated) {
			continue
		}
		lease, err := kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get lease of %s: %w", n.Name, err)
		}
		if !leaseFresh(lease, now) {
			continue
		}
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP {
				continue
			}
			if addr, err := netip.ParseAddr(a.Address); err == nil {
				out = append(out, lbrecon.Target{Name: n.Name, Address: addr})
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b lbrecon.Target) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

func leaseFresh(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return false
	}
	return now.Sub(l.Spec.RenewTime.Time) < time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second
}

func conditionTrue(conds []corev1.NodeCondition, t corev1.NodeConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// lbSummary is what the live view shows of the load balancer.
type lbSummary struct {
	Objects, Pending, Failed int
	Binds                    []string // "192.0.2.10:80"
	Targets                  []string // node names with a server
}

func summarizeLB(objs []lbrecon.Object) lbSummary {
	var s lbSummary
	targets := map[string]bool{}
	for _, o := range objs {
		s.Objects++
		switch o.State {
		case lbrecon.StatePending:
			s.Pending++
		case lbrecon.StateFailed:
			s.Failed++
		}
		switch spec := o.Spec.(type) {
		case lbrecon.BindSpec:
			s.Binds = append(s.Binds, netip.AddrPortFrom(spec.Address, spec.Port).String())
		case lbrecon.ServerSpec:
			if i := indexByte(o.Name, '.'); i > 0 {
				targets[o.Name[:i]] = true
			}
		}
	}
	slices.Sort(s.Binds)
	s.Binds = slices.Compact(s.Binds)
	for t := range targets {
		s.Targets = append(s.Targets, t)
	}
	slices.Sort(s.Targets)
	return s
}

func indexByte(s string, b byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == b {
			return i
		}
	}
	return -1
}
