package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/configmapsource"
	"github.com/reconkit/reconkit/nodestatus"
)

// startReconkit starts one reconkit agent: a NodeController with default
// settings and a configmapsource watch of the agents' ConfigMap.
func startReconkit(ctx context.Context, wg *sync.WaitGroup, cs kubernetes.Interface, name string) error {
	c, err := nodestatus.New(nodestatus.Config{Client: cs, Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}})
	if err != nil {
		return err
	}
	src, err := configmapsource.New(configmapsource.Config{Client: cs, Namespace: namespace, Name: configMap, Key: "config"})
	if err != nil {
		return err
	}
	wg.Go(func() {
		if err := c.Run(ctx); err != nil {
			fmt.Println("nodestatus:", name, err)
		}
	})
	wg.Go(func() {
		if err := src.Watch(ctx, func(context.Context, []byte, checkpoint.Source) {}); err != nil {
			fmt.Println("configmapsource:", name, err)
		}
	})
	return nil
}

// Constants of the kubelet v1.37.1 and client-go v0.37.1 loops the
// reference follows.
const (
	klRenewInterval  = 10 * time.Second // 0.25 × the 40 s lease
	klRenewJitter    = 0.04
	klUpdateRetries  = 5 // maxUpdateRetries: updates tried at once
	klEnsureFirst    = 100 * time.Millisecond
	klEnsureMax      = 7 * time.Second // maxBackoff
	klStatusInterval = 10 * time.Second
	klStatusRetries  = 5 // nodeStatusUpdateRetry
	klStatusReport   = 5 * time.Minute
)

// startKubelet starts one kubelet-style agent: it registers its Node,
// runs reflectors (informers) for its Node and the agents' ConfigMap, the
// lease controller and the node status loop.
func startKubelet(ctx context.Context, wg *sync.WaitGroup, cs kubernetes.Interface, name string) error {
	node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	nodes := cache.NewSharedIndexInformer(cache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "nodes", metav1.NamespaceAll,
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}),
		&corev1.Node{}, 0, cache.Indexers{})
	cms := cache.NewSharedIndexInformer(cache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", namespace,
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", configMap).String()
		}),
		&corev1.ConfigMap{}, 0, cache.Indexers{})
	wg.Go(func() { nodes.RunWithContext(ctx) })
	wg.Go(func() { cms.RunWithContext(ctx) })
	l := &klLease{cs: cs, name: name, owner: node.UID}
	wg.Go(func() { jitterUntil(ctx, klRenewInterval, klRenewJitter, l.sync) })
	s := &klStatus{cs: cs, name: name, store: nodes.GetStore()}
	wg.Go(func() { jitterUntil(ctx, klStatusInterval, klRenewJitter, s.sync) })
	return nil
}

// jitterUntil runs f at once and then period (plus up to jitter of it)
// after each run returns, until ctx ends: wait.JitterUntilWithContext
// with sliding=true.
func jitterUntil(ctx context.Context, period time.Duration, jitter float64, f func(context.Context)) {
	for ctx.Err() == nil {
		f(ctx)
		if sleep(ctx, period+time.Duration(rand.Float64()*jitter*float64(period))) != nil {
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// klLease is the kubelet's node lease controller
// (k8s.io/component-helpers/apimachinery/lease).
type klLease struct {
	cs     kubernetes.Interface
	name   string
	owner  types.UID
	latest *coordinationv1.Lease
}

func (l *klLease) sync(ctx context.Context) {
	if l.latest != nil {
		if l.retryUpdate(ctx, l.latest) == nil {
			return
		}
	}
	lease, created := l.backoffEnsure(ctx)
	l.latest = lease
	if !created && lease != nil {
		_ = l.retryUpdate(ctx, lease)
	}
}

func (l *klLease) leases() interface {
	Get(context.Context, string, metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(context.Context, *coordinationv1.Lease, metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(context.Context, *coordinationv1.Lease, metav1.UpdateOptions) (*coordinationv1.Lease, error)
} {
	return l.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
}

func (l *klLease) newLease(base *coordinationv1.Lease) *coordinationv1.Lease {
	var lease *coordinationv1.Lease
	if base == nil {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: corev1.NamespaceNodeLease,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: l.name, UID: l.owner}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(l.name), LeaseDurationSeconds: ptr.To[int32](40)},
		}
	} else {
		lease = base.DeepCopy()
	}
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	return lease
}

// backoffEnsure gets or creates the lease, waiting 200 ms doubling to 7 s
// between failed attempts, until it succeeds or ctx ends.
func (l *klLease) backoffEnsure(ctx context.Context) (*coordinationv1.Lease, bool) {
	wait := klEnsureFirst
	for {
		lease, created, err := l.ensure(ctx)
		if err == nil {
			return lease, created
		}
		wait = min(2*wait, klEnsureMax)
		if sleep(ctx, wait) != nil {
			return nil, false
		}
	}
}

func (l *klLease) ensure(ctx context.Context) (*coordinationv1.Lease, bool, error) {
	lease, err := l.leases().Get(ctx, l.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease, err := l.leases().Create(ctx, l.newLease(nil), metav1.CreateOptions{})
		return lease, err == nil, err
	}
	return lease, false, err
}

// retryUpdate tries up to 5 updates at once; a conflict gets the lease
// again (with backoffEnsure) before the next.
func (l *klLease) retryUpdate(ctx context.Context, base *coordinationv1.Lease) error {
	var err error
	for range klUpdateRetries {
		var lease *coordinationv1.Lease
		lease, err = l.leases().Update(ctx, l.newLease(base), metav1.UpdateOptions{})
		if err == nil {
			l.latest = lease
			return nil
		}
		if apierrors.IsConflict(err) {
			base, _ = l.backoffEnsure(ctx)
			if base == nil {
				return err
			}
		}
	}
	return err
}

// klStatus is the kubelet's node status loop (updateNodeStatus): up to 5
// tries, the first from the informer's cache, the others from a GET; a
// PATCH only when the status changed, or every 5 minutes. Nothing changes
// here, so it patches at start and then every 5 minutes.
type klStatus struct {
	cs         kubernetes.Interface
	name       string
	store      cache.Store
	lastReport time.Time
}

func (s *klStatus) sync(ctx context.Context) {
	for try := range klStatusRetries {
		if s.try(ctx, try) == nil {
			return
		}
	}
}

func (s *klStatus) try(ctx context.Context, try int) error {
	if try == 0 {
		obj, ok, err := s.store.GetByKey(s.name)
		if err != nil || !ok {
			return fmt.Errorf("node %s not in the informer's cache", s.name)
		}
		_ = obj.(*corev1.Node)
	} else if _, err := s.cs.CoreV1().Nodes().Get(ctx, s.name, metav1.GetOptions{}); err != nil {
		return err
	}
	if !s.lastReport.IsZero() && time.Since(s.lastReport) < klStatusReport {
		return nil
	}
	now := metav1.Now()
	patch := fmt.Appendf(nil, `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":%q,"lastTransitionTime":%q}]}}`,
		now.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	if _, err := s.cs.CoreV1().Nodes().PatchStatus(ctx, s.name, patch); err != nil {
		return err
	}
	s.lastReport = time.Now()
	return nil
}
