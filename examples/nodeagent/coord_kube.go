package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/lease"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
)

// The Leases of --store kube, in --namespace: the election's, and the
// gate's (<gate>-<agent> per agent, <gate>-status).
const (
	electionLease = "nodeagent-election"
	gateName      = "nodeagent-gate"
)

// kubeCoordination elects on a Lease (election/lease) and keeps the
// version gate in Leases (versiongate/kubestore): the agents need no etcd.
// The gate fences its status writes by the Lease term's token.
type kubeCoordination struct {
	opts options
	kube kubernetes.Interface // the view's and the operator's client
	// cfg configures the agents' clients, each through a proxy of its own.
	cfg  *rest.Config
	desc string

	obs  *lease.Elector
	view *kubestore.Store
	// clock is the candidates' and the gate stores' clock; nil means the
	// real clock (the fleet simulator gives each agent its own).
	clock clock.WithTicker
	// rand gives the candidates and the gate stores their random
	// sources by name; nil means math/rand/v2's global source (the fleet
	// simulator gives each agent seeded ones).
	rand func(part string) func() float64
}

func newKubeCoordination(opts options, kube kubernetes.Interface, cfg *rest.Config, desc string) (*kubeCoordination, error) {
	c := &kubeCoordination{opts: opts, kube: kube, cfg: cfg, desc: desc}
	var err error
	if c.obs, err = c.elector(kube, "observer", nil, nil); err != nil {
		return nil, err
	}
	if c.view, err = c.store(kube); err != nil {
		_ = c.obs.Close()
		return nil, err
	}
	return c, nil
}

// elector is a candidate on the election Lease. Followers take over
// electionTTL after they last saw the Lease renewed; the leader renews
// every quarter of it and ends its term locally at three quarters.
func (c *kubeCoordination) elector(kube kubernetes.Interface, identity string, metrics election.Metrics, events election.EventRecorder) (*lease.Elector, error) {
	d := c.opts.electionTTL
	return lease.New(lease.Config{
		Client:        kube,
		Namespace:     c.opts.namespace,
		Name:          electionLease,
		Identity:      identity,
		LeaseDuration: d,
		RenewDeadline: d * 3 / 4,
		RetryPeriod:   d / 4,
		Metrics:       metrics,
		Events:        events,
		Clock:         c.clock,
		Rand:          randOf(c.rand, "lease"),
	})
}

func (c *kubeCoordination) store(kube kubernetes.Interface) (*kubestore.Store, error) {
	return kubestore.New(kubestore.Config{Client: kube, Namespace: c.opts.namespace, Gate: gateName, Clock: c.clock, Rand: randOf(c.rand, "kubestore")})
}

func (c *kubeCoordination) join(name string, h hooks, events election.EventRecorder) (m *member, err error) {
	m = &member{}
	// A return sets the named result to nil before this runs: close
	// what was started through a copy.
	started := m
	defer func() {
		if err != nil {
			closeLinks(started.links)
		}
	}()
	cfg, links, err := proxiedConfig(c.cfg)
	if err != nil {
		return nil, err
	}
	m.links = links
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client of %s: %w", name, err)
	}
	if m.store, err = c.store(kube); err != nil {
		return nil, err
	}
	if m.elector, err = c.elector(kube, name, h.Election, events); err != nil {
		return nil, err
	}
	return m, nil
}

// proxiedConfig returns a copy of cfg that reaches its server through a
// loopback proxy of its own, which a scenario cuts.
func proxiedConfig(cfg *rest.Config) (*rest.Config, []link, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Host == "" {
		return nil, nil, fmt.Errorf("kubernetes server %q: not a URL with a host", cfg.Host)
	}
	target := u.Host
	if u.Port() == "" {
		port := "443"
		if u.Scheme == "http" {
			port = "80"
		}
		target = net.JoinHostPort(u.Hostname(), port)
	}
	l, err := startLink(target)
	if err != nil {
		return nil, nil, err
	}
	out := rest.CopyConfig(cfg)
	if !out.Insecure && out.ServerName == "" {
		out.ServerName = u.Hostname() // the certificate names the server, not the proxy
	}
	u.Host = l.Addr()
	out.Host = u.String()
	return out, []link{l}, nil
}

func (c *kubeCoordination) observer() election.Elector { return c.obs }
func (c *kubeCoordination) status() versiongate.Store  { return c.view }

func (c *kubeCoordination) where() string {
	return "Lease election and version gate on " + c.desc
}

func (c *kubeCoordination) traffic() string {
	return "its election and gate traffic to the Kubernetes API"
}

// close closes the observer. On a cluster that outlives the run
// (--kubeconfig), env's deleteKubeObjects deletes the Leases.
func (c *kubeCoordination) close(context.Context) error { return c.obs.Close() }

// deleteGateLeases deletes the election's Lease and the gate's Leases in
// ns. The gate keeps a finalizer on its status Lease so that a delete does
// not pass for a first boot; removing it first is what ends the gate.
func deleteGateLeases(ctx context.Context, kube kubernetes.Interface, ns string) error {
	var errs []error
	ignore := func(err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	leases := kube.CoordinationV1().Leases(ns)
	ignore(leases.Delete(ctx, electionLease, metav1.DeleteOptions{}))
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: kubestore.LabelGate + "=" + gateName})
	if err != nil {
		return fmt.Errorf("list the gate's Leases: %w", err)
	}
	for _, l := range list.Items {
		if len(l.Finalizers) > 0 {
			patch := fmt.Appendf(nil, `{"metadata":{"finalizers":null,"resourceVersion":%q}}`, l.ResourceVersion)
			_, err := leases.Patch(ctx, l.Name, types.MergePatchType, patch, metav1.PatchOptions{})
			ignore(err)
		}
		ignore(leases.Delete(ctx, l.Name, metav1.DeleteOptions{}))
	}
	return errors.Join(errs...)
}
