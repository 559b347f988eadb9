package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// seedController re-implements, for comparison, the call pattern of the
// original virtual-kubelet node controller (lease era), on
// coordination.k8s.io/v1 instead of v1beta1. Kept on purpose:
//
//   - one loop with a ping timer (10s) and a status timer (1 min);
//   - every ping tick pings, then updates the lease (a PUT from the last
//     lease it got back);
//   - every status tick GETs the Node and PATCHes its status (three-way, with
//     two last-applied annotations), retrying on conflict; heartbeat times
//     are stamped before every update, so the patch is never empty;
//   - the lease duration is the ping interval times 5, times 5 again;
//   - an existing lease is deleted and created again at start.
type seedController struct {
	client         kubernetes.Interface
	node           *corev1.Node
	lease          *coordinationv1.Lease
	pingInterval   time.Duration
	statusInterval time.Duration
}

const (
	seedStatusAnnotation = "virtual-kubelet.io/last-applied-node-status"
	seedMetaAnnotation   = "virtual-kubelet.io/last-applied-object-meta"
)

func newSeed(client kubernetes.Interface, node *corev1.Node) *seedController {
	return &seedController{client: client, node: node.DeepCopy(), pingInterval: 10 * time.Second, statusInterval: time.Minute}
}

func (s *seedController) Run(ctx context.Context) error {
	if err := s.ensureNode(ctx); err != nil {
		return err
	}
	d := int32(s.pingInterval.Seconds()*5) * 5 // the original's double multiplication
	s.lease = &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: s.node.Name, Namespace: corev1.NamespaceNodeLease},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &s.node.Name, LeaseDurationSeconds: &d},
	}
	l, err := s.ensureLease(ctx, s.renewed(s.lease))
	if err != nil {
		return err
	}
	s.lease = l
	pingTimer := time.NewTimer(s.pingInterval)
	defer pingTimer.Stop()
	statusTimer := time.NewTimer(s.statusInterval)
	defer statusTimer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-statusTimer.C:
			_ = s.updateStatus(ctx)
			statusTimer.Reset(s.statusInterval)
		case <-pingTimer.C:
			if l, err := s.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(ctx, s.renewed(s.lease), metav1.UpdateOptions{}); err == nil {
				s.lease = l
			}
			pingTimer.Reset(s.pingInterval)
		}
	}
}

func (s *seedController) renewed(l *coordinationv1.Lease) *coordinationv1.Lease {
	l = l.DeepCopy()
	l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	return l
}

func (s *seedController) ensureNode(ctx context.Context) error {
	err := s.updateStatus(ctx)
	if err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	n, err := s.client.CoreV1().Nodes().Create(ctx, s.node, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	s.node = n
	return nil
}

func (s *seedController) ensureLease(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	leases := s.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	got, err := leases.Create(ctx, l, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		if err := leases.Delete(ctx, l.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		got, err = leases.Create(ctx, l, metav1.CreateOptions{})
	}
	return got, err
}

func (s *seedController) updateStatus(ctx context.Context) error {
	now := metav1.Now()
	for i := range s.node.Status.Conditions {
		s.node.Status.Conditions[i].LastHeartbeatTime = now
	}
	nodes := s.client.CoreV1().Nodes()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		server, err := nodes.Get(ctx, s.node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		patch, err := seedPatch(s.node, server)
		if err != nil {
			return err
		}
		n, err := nodes.Patch(ctx, s.node.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		if err != nil {
			return err
		}
		s.node.ObjectMeta = metav1.ObjectMeta{Name: n.Name, UID: n.UID, Labels: s.node.Labels, Annotations: s.node.Annotations}
		return nil
	})
}

// seedPatch is the original's three-way patch: the last applied metadata
// and status from two annotations, against the server's node.
func seedPatch(want, server *corev1.Node) ([]byte, error) {
	old := corev1.Node{}
	if st, ok1 := server.Annotations[seedStatusAnnotation]; ok1 {
		if om, ok2 := server.Annotations[seedMetaAnnotation]; ok2 {
			if err := json.Unmarshal([]byte(om), &old.ObjectMeta); err != nil {
				return nil, fmt.Errorf("old meta: %w", err)
			}
			if err := json.Unmarshal([]byte(st), &old.Status); err != nil {
				return nil, fmt.Errorf("old status: %w", err)
			}
		}
	}
	mod := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: server.Name, UID: server.UID, Labels: want.Labels, Annotations: map[string]string{}}}
	for k, v := range want.Annotations {
		if k != seedStatusAnnotation && k != seedMetaAnnotation {
			mod.Annotations[k] = v
		}
	}
	want.Status.DeepCopyInto(&mod.Status)
	mb, err := json.Marshal(mod.ObjectMeta)
	if err != nil {
		return nil, err
	}
	mod.Annotations[seedMetaAnnotation] = string(mb)
	sb, err := json.Marshal(mod.Status)
	if err != nil {
		return nil, err
	}
	mod.Annotations[seedStatusAnnotation] = string(sb)
	ob, _ := json.Marshal(old)
	nb, _ := json.Marshal(mod)
	cb, _ := json.Marshal(server)
	schema, err := strategicpatch.NewPatchMetaFromStruct(&corev1.Node{})
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateThreeWayMergePatch(ob, nb, cb, schema, true)
}
