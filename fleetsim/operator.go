package fleetsim

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/kubefake"
)

// changeService deletes a Service, or changes its type between
// LoadBalancer and ClusterIP, and puts it back 20 seconds to 2 minutes
// later.
func (n *nemesis) changeService(ctx context.Context, r *rand.Rand, tl func(string, ...any)) {
	w := n.w
	list, err := w.observer.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) == 0 {
		tl("no Service (%v)", err)
		return
	}
	items := list.Items
	slices.SortFunc(items, func(a, b corev1.Service) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	svc := items[r.IntN(len(items))]
	d := between(r, 20*time.Second, 2*time.Minute)
	services := w.observer.CoreV1().Services(svc.Namespace)
	key := svc.Namespace + "/" + svc.Name
	if n.services[key] {
		tl("Service %s is changed already", key)
		return
	}
	if n.services == nil {
		n.services = map[string]bool{}
	}
	n.services[key] = true
	if r.IntN(2) == 0 {
		err := services.Delete(ctx, svc.Name, metav1.DeleteOptions{})
		tl("delete Service %s, back in %s (%v)", key, d, err)
		n.later(d, "Service "+key+" created again", func(ctx context.Context) {
			delete(n.services, key)
			again := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name,
				Labels: svc.Labels, Annotations: svc.Annotations}, Spec: svc.Spec}
			if _, err := services.Create(ctx, again, metav1.CreateOptions{}); err != nil {
				w.tl.add("nemesis", "create Service %s: %v", key, err)
			}
		})
		return
	}
	was := svc.Spec.Type
	to := corev1.ServiceTypeClusterIP
	if was != corev1.ServiceTypeLoadBalancer {
		to = corev1.ServiceTypeLoadBalancer
	}
	err = setServiceType(ctx, w, svc.Namespace, svc.Name, to)
	tl("Service %s type %s -> %s, back in %s (%v)", key, was, to, d, err)
	n.later(d, "Service "+key+" type back to "+string(was), func(ctx context.Context) {
		delete(n.services, key)
		if err := setServiceType(ctx, w, svc.Namespace, svc.Name, was); err != nil {
			w.tl.add("nemesis", "Service %s type back: %v", key, err)
		}
	})
}

// setServiceType sets a Service's type as kubectl edit would: node ports
// and the load balancer's class go with LoadBalancer.
func setServiceType(ctx context.Context, w *world, ns, name string, t corev1.ServiceType) error {
	services := w.observer.CoreV1().Services(ns)
	svc, err := services.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	svc.Spec.Type = t
	if t == corev1.ServiceTypeClusterIP {
		for i := range svc.Spec.Ports {
			svc.Spec.Ports[i].NodePort = 0
		}
		svc.Spec.LoadBalancerClass = nil
		svc.Spec.ExternalTrafficPolicy = ""
		svc.Spec.AllocateLoadBalancerNodePorts = nil
	}
	_, err = services.Update(ctx, svc, metav1.UpdateOptions{})
	return err
}

// namespaced are the resources the namespace controller empties, among
// those the simulated agents use.
var namespaced = []schema.GroupVersionResource{
	{Version: "v1", Resource: "configmaps"}, {Version: "v1", Resource: "secrets"},
	{Version: "v1", Resource: "services"}, {Version: "v1", Resource: "endpoints"},
	{Version: "v1", Resource: "events"}, {Version: "v1", Resource: "pods"},
	{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
	{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"},
}

// deleteNamespace deletes one namespace of Config.Objects as the
// namespace controller does once an operator deleted it: every object in
// it is deleted (those with finalizers are left terminating), and creations
// in it are refused with 403 Forbidden until, 20 seconds to 2 minutes
// later, the operator creates it and Config.Objects in it again.
func (n *nemesis) deleteNamespace(ctx context.Context, r *rand.Rand, tl func(string, ...any)) {
	w := n.w
	var spaces []string
	for _, o := range w.cfg.Objects {
		if m, err := meta.Accessor(o); err == nil && m.GetNamespace() != "" {
			spaces = append(spaces, m.GetNamespace())
		}
	}
	slices.Sort(spaces)
	spaces = slices.Compact(spaces)
	if len(spaces) == 0 {
		tl("no namespace among Config.Objects")
		return
	}
	ns := spaces[r.IntN(len(spaces))]
	d := between(r, 20*time.Second, 2*time.Minute)
	terminating := w.terminating(ns)
	terminating.Store(true)
	deleted := 0
	tracker := w.server.Tracker()
	for _, gvr := range namespaced {
		list, err := tracker.List(gvr, schema.GroupVersionKind{Group: gvr.Group, Version: gvr.Version}, ns)
		if err != nil {
			continue
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			continue
		}
		for _, it := range items {
			m, err := meta.Accessor(it)
			if err != nil {
				continue
			}
			if err := deleteVia(w, gvr, ns, m.GetName()); err == nil {
				deleted++
			}
		}
	}
	tl("namespace %s deleted: %d objects deleted, creations in it refused for %s", ns, deleted, d)
	n.later(d, "namespace "+ns+" created again, with its objects", func(ctx context.Context) {
		terminating.Store(false)
		for _, o := range w.cfg.Objects {
			if m, err := meta.Accessor(o); err == nil && m.GetNamespace() == ns {
				if err := createVia(w, o.DeepCopyObject()); err != nil && !apierrors.IsAlreadyExists(err) {
					w.tl.add("nemesis", "create %s/%s again: %v", ns, m.GetName(), err)
				}
			}
		}
	})
}

// terminating returns the flag that makes the apiserver refuse creations
// in ns, injecting its fault the first time.
func (w *world) terminating(ns string) *atomic.Bool {
	if f, ok := w.namespaces[ns]; ok {
		return f
	}
	f := new(atomic.Bool)
	if w.namespaces == nil {
		w.namespaces = map[string]*atomic.Bool{}
	}
	w.namespaces[ns] = f
	w.server.Inject(kubefake.Fault{Verb: "create", Namespace: ns,
		Match: func(k8stesting.Action) bool { return f.Load() },
		Answer: func(a k8stesting.Action) error {
			return apierrors.NewForbidden(a.GetResource().GroupResource(), "",
				fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns))
		}})
	return f
}

// deleteVia deletes an object through the checks' own client, as the
// namespace controller does (so that watches see it and finalizers hold).
func deleteVia(w *world, gvr schema.GroupVersionResource, ns, name string) error {
	action := k8stesting.NewDeleteAction(gvr, ns, name)
	_, err := w.observer.Invokes(action, nil)
	return err
}

// createVia creates obj through the checks' own client.
func createVia(w *world, obj runtime.Object) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		return fmt.Errorf("kind of %s: %w", m.GetName(), err)
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gvks[0])
	_, err = w.observer.Invokes(k8stesting.NewCreateAction(gvr, m.GetNamespace(), obj), nil)
	return err
}

// RetiredHolder is the identity LeftoverPreferredHolder names: no agent of
// a fleet has it.
const RetiredHolder = "retired-candidate"

// LeftoverPreferredHolder returns an operator edit that sets
// spec.preferredHolder of the Lease namespace/name to RetiredHolder and
// leaves it there, as a fleet that ran Coordinated Leader Election and
// turned it off, or a preemption whose candidate is gone, leaves it: the
// apiserver's election controller no longer runs to clear it. The edit
// has no Undo: the candidates must clear it themselves (election/lease
// without Config.Coordinated does), or the Lease's holder yields at every
// renewal, which [TermChurn] reports. It fails when the Lease does not
// exist.
func LeftoverPreferredHolder(namespace, name string) Edit {
	return Edit{Name: "leave preferredHolder " + RetiredHolder + " on Lease " + namespace + "/" + name,
		Do: func(ctx context.Context, c kubernetes.Interface) error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				leases := c.CoordinationV1().Leases(namespace)
				l, err := leases.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				l.Spec.PreferredHolder = ptr.To(RetiredHolder)
				_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
				return err
			})
		}}
}
