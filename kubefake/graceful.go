package kubefake

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// defaultTerminationGracePeriod is what the apiserver's defaulting puts
// in a pod's spec.terminationGracePeriodSeconds when the pod names none.
const defaultTerminationGracePeriod = corev1.DefaultTerminationGracePeriodSeconds

// gracePeriod reports whether deleting stored is graceful, as it is for
// pods (the only graceful kind of the core API), and the grace period
// the deletion asks for, as the pod strategy's CheckGracefulDelete
// computes it: the request's, else the pod's, else the default; zero for
// a pod bound to no node or already terminated.
func gracePeriod(stored runtime.Object, requested *int64) (int64, bool) {
	pod, ok := stored.(*corev1.Pod)
	if !ok {
		return 0, false
	}
	period := int64(defaultTerminationGracePeriod)
	switch {
	case requested != nil:
		period = *requested
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		period = *pod.Spec.TerminationGracePeriodSeconds
	}
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		period = 0
	}
	if period < 0 {
		period = 1
	}
	return period, true
}

// deleteGracefully deletes a pod as the apiserver's graceful deletion
// does (rest.BeforeDelete and the store's
// updateForGracefulDeletionAndFinalizers): it writes deletionTimestamp
// (now plus the grace period) and deletionGracePeriodSeconds, and
// removes the pod at once only when the period is zero and no finalizer
// holds it; a later delete may only shorten a pending period. The
// caller holds s.mu.
func (s *Server) deleteGracefully(a k8stesting.DeleteActionImpl, stored runtime.Object, cur metav1.Object, period int64) (bool, runtime.Object, error) {
	gvr, ns := a.GetResource(), a.GetNamespace()
	prev := stored.DeepCopyObject()
	if ts := cur.GetDeletionTimestamp(); ts != nil {
		g := cur.GetDeletionGracePeriodSeconds()
		switch {
		case g == nil || *g == 0:
			// Already due: finalizers hold it, or nothing does.
			if len(cur.GetFinalizers()) > 0 {
				return true, stored, nil
			}
			return s.remove(gvr, ns, stored)
		case a.DeleteOptions.GracePeriodSeconds == nil || *a.DeleteOptions.GracePeriodSeconds >= *g:
			return true, stored, nil // pending; only a shorter period changes it
		}
		period = *a.DeleteOptions.GracePeriodSeconds
		due := metav1.NewTime(ts.Add(time.Duration(period-*g) * time.Second))
		cur.SetDeletionTimestamp(&due)
	} else {
		due := metav1.NewTime(s.now().Add(time.Duration(period) * time.Second))
		cur.SetDeletionTimestamp(&due)
	}
	cur.SetDeletionGracePeriodSeconds(ptr.To(period))
	cur.SetResourceVersion(s.next())
	if _, _, err := s.commit(k8stesting.UpdateActionImpl{
		ActionImpl: k8stesting.ActionImpl{Namespace: ns, Verb: "update", Resource: gvr},
		Object:     stored,
	}, gvr, ns, "MODIFIED", stored, prev); err != nil {
		return true, nil, err
	}
	if period > 0 || len(cur.GetFinalizers()) > 0 {
		return true, stored.DeepCopyObject(), nil
	}
	// A zero period deletes at once, after the write that marked it, as
	// the apiserver does: watchers see MODIFIED, then DELETED.
	marked, err := s.tracker.Get(gvr, ns, cur.GetName())
	if err != nil {
		return true, nil, err
	}
	if _, err := meta.Accessor(marked); err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	return s.remove(gvr, ns, marked)
}
