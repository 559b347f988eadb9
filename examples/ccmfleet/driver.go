package ccmfleet

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	"k8s.io/utils/clock"
)

// The service controller's constants (controllers/service/controller.go).
const (
	// Finalizer is the load-balancer cleanup finalizer
	// (servicehelper.LoadBalancerCleanupFinalizer).
	Finalizer = "service.kubernetes.io/load-balancer-cleanup"
	// MinRetryDelay and MaxRetryDelay bound the per-Service exponential
	// backoff of an error that is not a RetryError (minRetryDelay,
	// maxRetryDelay).
	MinRetryDelay = 5 * time.Second
	MaxRetryDelay = 300 * time.Second
	// toBeDeletedTaint is the cluster autoscaler's taint (ToBeDeletedTaint).
	toBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"
)

// ErrInvalidConfig reports a Config New cannot run.
var ErrInvalidConfig = errors.New("ccmfleet: invalid config")

// Config configures a Driver.
type Config struct {
	// Client is the apiserver the driver reads Services and Nodes from and
	// writes finalizers and status to. Required.
	Client kubernetes.Interface
	// Balancer is the cloud's load balancer. Required.
	Balancer cloudprovider.LoadBalancer
	// ClusterName is passed to every call; empty means "kubernetes".
	ClusterName string
	// Clock is the driver's clock; nil means the real clock.
	Clock clock.WithTicker
	// Resync is how often the driver lists Services and Nodes, standing in
	// for the informers' watch events; 0 means 5 seconds.
	Resync time.Duration
}

// Driver drives a cloudprovider.LoadBalancer as k8s.io/cloud-provider
// v0.37.1's service controller does, with one worker, in one goroutine
// (see the package documentation for where it differs).
type Driver struct {
	cfg Config
	// keys is the state of every Service key seen in this process.
	keys map[string]*key
	// nodes is the node informer's last view, by name.
	nodes map[string]*v1.Node
	// nodeSync is whether the node queue holds a key: a node was added or
	// removed, or changed in a way shouldSyncUpdatedNode names, since the
	// last node sync.
	nodeSync bool
	// lastSynced is the controller's lastSyncedNodes: by Service key, the
	// nodes its load balancer was last given (by EnsureLoadBalancer or a
	// node sync), stored before the call, whatever its outcome.
	lastSynced map[string][]*v1.Node
}

// key is one Service key's state: the informer's last view of it, the
// controller's serviceCache entry, and its place in the work queue.
type key struct {
	observed *v1.Service // the lister's copy; nil once the Service is gone
	cached   *v1.Service // serviceCache: the last Service processed, nil after a delete
	due      time.Time   // when the queue hands it out; zero when not queued
	failures int         // the rate limiter's count, reset by Forget
}

// New validates cfg and returns a Driver.
func New(cfg Config) (*Driver, error) {
	if cfg.Client == nil || cfg.Balancer == nil {
		return nil, fmt.Errorf("%w: Client and Balancer are required", ErrInvalidConfig)
	}
	if cfg.Resync < 0 {
		return nil, fmt.Errorf("%w: Resync %v is negative", ErrInvalidConfig, cfg.Resync)
	}
	if cfg.ClusterName == "" {
		cfg.ClusterName = "kubernetes"
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Resync == 0 {
		cfg.Resync = 5 * time.Second
	}
	return &Driver{cfg: cfg, keys: map[string]*key{}, nodes: map[string]*v1.Node{}, lastSynced: map[string][]*v1.Node{}}, nil
}

// Run syncs until ctx ends, then returns nil. A failed listing is retried
// after Resync, as a reflector retries its list.
func (d *Driver) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	for {
		wait, err := d.Sync(ctx)
		if err != nil && ctx.Err() == nil {
			log.V(1).Info("service sync", "error", err.Error())
		}
		t := d.cfg.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

// Sync lists Services and Nodes, queues the keys the informers' events
// would queue, and processes every key that is due, one at a time. It
// returns how long to wait before the next Sync: until the next key is due,
// at most Resync. Its error is the listing's; a key's error goes to that
// key's backoff.
func (d *Driver) Sync(ctx context.Context) (time.Duration, error) {
	services, err := d.cfg.Client.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return d.cfg.Resync, fmt.Errorf("listing services: %w", err)
	}
	nodeList, err := d.cfg.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return d.cfg.Resync, fmt.Errorf("listing nodes: %w", err)
	}
	now := d.cfg.Clock.Now()
	seen := map[string]bool{}
	for i := range services.Items {
		svc := &services.Items[i]
		name := svc.Namespace + "/" + svc.Name
		seen[name] = true
		k := d.keys[name]
		if k == nil {
			k = &key{}
			d.keys[name] = k
		}
		old := k.observed
		k.observed = svc
		switch {
		case old == nil: // an add
			if wantsLoadBalancer(svc) || needsCleanup(svc) {
				k.due = now
			}
		case old.ResourceVersion != svc.ResourceVersion: // an update
			if needsUpdate(old, svc) || needsCleanup(svc) {
				k.due = now
			}
		}
	}
	for name, k := range d.keys {
		if !seen[name] && k.observed != nil { // a delete
			k.observed = nil
			k.due = now
		}
	}
	var nodes []*v1.Node
	seenNodes := map[string]bool{}
	for i := range nodeList.Items {
		n := &nodeList.Items[i]
		seenNodes[n.Name] = true
		old, ok := d.nodes[n.Name]
		switch {
		case !ok: // an add
			d.nodeSync = true
		case old.ResourceVersion != n.ResourceVersion && shouldSyncUpdatedNode(old, n): // an update
			d.nodeSync = true
		}
		d.nodes[n.Name] = n
		if stableNode(n) {
			nodes = append(nodes, n)
		}
	}
	for name := range d.nodes {
		if !seenNodes[name] { // a delete
			delete(d.nodes, name)
			d.nodeSync = true
		}
	}

	names := make([]string, 0, len(d.keys))
	for name := range d.keys {
		names = append(names, name)
	}
	slices.Sort(names)
	// The node worker runs beside the service workers upstream, and acts
	// as soon as its informer delivers a node's change: before the
	// Services due at the same listing.
	if d.nodeSync && ctx.Err() == nil {
		d.nodeSync = false
		d.syncNodes(ctx, names, nodes)
	}

	for _, name := range names {
		k := d.keys[name]
		if k.due.IsZero() || k.due.After(now) || ctx.Err() != nil {
			continue
		}
		k.due = time.Time{}
		err := d.syncService(ctx, name, k, nodes)
		var re *api.RetryError
		switch {
		case err == nil:
			k.failures = 0 // Forget
		case errors.As(err, &re): // AddAfter
			k.due = d.cfg.Clock.Now().Add(re.RetryAfter())
			logr.FromContextOrDiscard(ctx).V(1).Info("retrying", "service", name, "after", re.RetryAfter(), "error", err.Error())
		default: // AddRateLimited
			k.due = d.cfg.Clock.Now().Add(backoff(k.failures))
			k.failures++
			logr.FromContextOrDiscard(ctx).V(1).Info("backing off", "service", name, "failures", k.failures, "error", err.Error())
		}
		if k.observed == nil && k.cached == nil && k.due.IsZero() {
			delete(d.keys, name)
		}
	}

	wait := d.cfg.Resync
	now = d.cfg.Clock.Now()
	for _, k := range d.keys {
		if !k.due.IsZero() {
			wait = min(wait, max(k.due.Sub(now), time.Millisecond))
		}
	}
	return wait, nil
}

// backoff is the exponential failure rate limiter's delay after n failures.
func backoff(n int) time.Duration {
	if n >= 10 {
		return MaxRetryDelay
	}
	return min(MinRetryDelay<<n, MaxRetryDelay)
}

// syncService is the controller's syncService for one key.
func (d *Driver) syncService(ctx context.Context, name string, k *key, nodes []*v1.Node) error {
	if k.observed == nil { // processServiceDeletion
		if k.cached == nil {
			return nil
		}
		if err := d.processLoadBalancerDelete(ctx, k.cached); err != nil {
			return err
		}
		k.cached = nil
		return nil
	}
	svc := k.observed.DeepCopy()
	// processServiceCreateOrUpdate
	if k.cached != nil && k.cached.UID != svc.UID {
		if err := d.processLoadBalancerDelete(ctx, k.cached); err != nil {
			return err
		}
	}
	k.cached = svc
	deleted, err := d.syncLoadBalancerIfNeeded(ctx, svc, nodes)
	if err != nil {
		return err
	}
	if deleted {
		k.cached = nil
	}
	return nil
}

// processLoadBalancerDelete is the controller's, for a Service deleted
// without the finalizer.
func (d *Driver) processLoadBalancerDelete(ctx context.Context, svc *v1.Service) error {
	if !wantsLoadBalancer(svc) {
		return nil
	}
	return d.cfg.Balancer.EnsureLoadBalancerDeleted(ctx, d.cfg.ClusterName, svc)
}

// syncLoadBalancerIfNeeded is the controller's: it reports whether it
// took the delete branch.
func (d *Driver) syncLoadBalancerIfNeeded(ctx context.Context, svc *v1.Service, nodes []*v1.Node) (bool, error) {
	previous := svc.Status.LoadBalancer.DeepCopy()
	var status *v1.LoadBalancerStatus
	deleting := !wantsLoadBalancer(svc) || needsCleanup(svc)
	if deleting {
		status = &v1.LoadBalancerStatus{}
		_, exists, err := d.cfg.Balancer.GetLoadBalancer(ctx, d.cfg.ClusterName, svc)
		if err != nil {
			return true, fmt.Errorf("failed to check if load balancer exists before cleanup: %v", err)
		}
		if exists {
			if err := d.cfg.Balancer.EnsureLoadBalancerDeleted(ctx, d.cfg.ClusterName, svc); err != nil &&
				!errors.Is(err, cloudprovider.ImplementedElsewhere) {
				// %v, as the controller does: a RetryError is backed off.
				return true, fmt.Errorf("failed to delete load balancer: %v", err)
			}
		}
		if svc, err = d.setFinalizer(ctx, svc, false); err != nil {
			return true, fmt.Errorf("failed to remove load balancer cleanup finalizer: %v", err)
		}
	} else {
		var err error
		if svc, err = d.setFinalizer(ctx, svc, true); err != nil {
			return false, fmt.Errorf("failed to add load balancer cleanup finalizer: %v", err)
		}
		d.lastSynced[svc.Namespace+"/"+svc.Name] = nodes
		status, err = d.cfg.Balancer.EnsureLoadBalancer(ctx, d.cfg.ClusterName, svc, nodes)
		if errors.Is(err, cloudprovider.ImplementedElsewhere) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("failed to ensure load balancer: %w", err) // %w: a RetryError's delay is honoured
		}
		if status == nil {
			return false, errors.New("service status returned by EnsureLoadBalancer is nil")
		}
	}
	if svc == nil || statusEqual(previous, status) {
		return deleting, nil
	}
	updated := svc.DeepCopy()
	updated.Status.LoadBalancer = *status
	if _, err := d.cfg.Client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil &&
		!apierrors.IsNotFound(err) {
		return deleting, fmt.Errorf("failed to update load balancer status: %v", err)
	}
	return deleting, nil
}

// setFinalizer adds or removes the cleanup finalizer, if it is not so
// already, and returns the Service as written, or nil once removing the
// last finalizer of a deleted Service removed it.
func (d *Driver) setFinalizer(ctx context.Context, svc *v1.Service, want bool) (*v1.Service, error) {
	if slices.Contains(svc.Finalizers, Finalizer) == want {
		return svc, nil
	}
	updated := svc.DeepCopy()
	if want {
		updated.Finalizers = append(updated.Finalizers, Finalizer)
	} else {
		updated.Finalizers = slices.DeleteFunc(updated.Finalizers, func(f string) bool { return f == Finalizer })
	}
	out, err := d.cfg.Client.CoreV1().Services(svc.Namespace).Update(ctx, updated, metav1.UpdateOptions{})
	if !want && apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if out.DeletionTimestamp != nil && len(out.Finalizers) == 0 {
		return nil, nil
	}
	return out, nil
}

func wantsLoadBalancer(svc *v1.Service) bool {
	return svc.Spec.Type == v1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass == nil
}

func needsCleanup(svc *v1.Service) bool {
	if !slices.Contains(svc.Finalizers, Finalizer) {
		return false
	}
	return svc.DeletionTimestamp != nil || svc.Spec.Type != v1.ServiceTypeLoadBalancer
}

// needsUpdate is the controller's, field for field.
func needsUpdate(old, cur *v1.Service) bool {
	if !wantsLoadBalancer(old) && !wantsLoadBalancer(cur) {
		return false
	}
	if wantsLoadBalancer(old) != wantsLoadBalancer(cur) {
		return true
	}
	if !reflect.DeepEqual(old.Spec.LoadBalancerSourceRanges, cur.Spec.LoadBalancerSourceRanges) {
		return true
	}
	if !portsEqual(old.Spec.Ports, cur.Spec.Ports) || old.Spec.SessionAffinity != cur.Spec.SessionAffinity ||
		!reflect.DeepEqual(old.Spec.SessionAffinityConfig, cur.Spec.SessionAffinityConfig) ||
		old.Spec.LoadBalancerIP != cur.Spec.LoadBalancerIP || !slices.Equal(old.Spec.ExternalIPs, cur.Spec.ExternalIPs) ||
		!reflect.DeepEqual(old.Annotations, cur.Annotations) || old.UID != cur.UID ||
		old.Spec.ExternalTrafficPolicy != cur.Spec.ExternalTrafficPolicy ||
		old.Spec.HealthCheckNodePort != cur.Spec.HealthCheckNodePort || len(old.Spec.IPFamilies) != len(cur.Spec.IPFamilies) {
		return true
	}
	return false
}

func portsEqual(x, y []v1.ServicePort) bool {
	return slices.EqualFunc(x, y, func(a, b v1.ServicePort) bool {
		return a.Name == b.Name && a.Protocol == b.Protocol && a.Port == b.Port && a.NodePort == b.NodePort &&
			a.TargetPort == b.TargetPort && reflect.DeepEqual(a.AppProtocol, b.AppProtocol)
	})
}

// syncNodes is the controller's node worker for one key of its node
// queue (syncNodes, updateLoadBalancerHosts, nodeSyncService): for every
// Service in the serviceCache that wants a load balancer, in the order of
// names, when the stable nodes differ from the last it was given (by name
// and providerID, nodesSufficientlyEqual), UpdateLoadBalancer with them;
// when that fails and GetLoadBalancer does not answer "not exists", the
// Service's key is queued at once (serviceQueue.Add, not rate-limited).
// The nodes are stored as the Service's last synced before the call.
func (d *Driver) syncNodes(ctx context.Context, names []string, nodes []*v1.Node) {
	log := logr.FromContextOrDiscard(ctx)
	for _, name := range names {
		k := d.keys[name]
		if k == nil || k.cached == nil || !wantsLoadBalancer(k.cached) || ctx.Err() != nil {
			continue
		}
		old := d.lastSynced[name]
		d.lastSynced[name] = nodes
		if nodesSufficientlyEqual(old, nodes) {
			continue
		}
		err := d.cfg.Balancer.UpdateLoadBalancer(ctx, d.cfg.ClusterName, k.cached, nodes)
		if err == nil || errors.Is(err, cloudprovider.ImplementedElsewhere) {
			continue
		}
		if _, exists, gerr := d.cfg.Balancer.GetLoadBalancer(ctx, d.cfg.ClusterName, k.cached); gerr == nil && !exists {
			continue
		}
		log.V(1).Info("node sync failed; queueing the service", "service", name, "error", err.Error())
		if now := d.cfg.Clock.Now(); k.due.IsZero() || k.due.After(now) {
			k.due = now
		}
	}
}

// shouldSyncUpdatedNode is the controller's: a node's update queues a node
// sync only when it changes whether the node is excluded by label, or its
// providerID. Readiness is none of the controller's predicates since
// Kubernetes 1.27: a node turning NotReady keeps its load balancer targets.
func shouldSyncUpdatedNode(old, cur *v1.Node) bool {
	return nodeIncluded(old) != nodeIncluded(cur) || old.Spec.ProviderID != cur.Spec.ProviderID
}

// nodesSufficientlyEqual is the controller's: the same names, each with the
// same providerID.
func nodesSufficientlyEqual(x, y []*v1.Node) bool {
	if len(x) != len(y) {
		return false
	}
	m := make(map[string]string, len(x))
	for _, n := range x {
		m[n.Name] = n.Spec.ProviderID
	}
	for _, n := range y {
		if id, ok := m[n.Name]; !ok || id != n.Spec.ProviderID {
			return false
		}
	}
	return true
}

// nodeIncluded is the controller's nodeIncludedPredicate.
func nodeIncluded(n *v1.Node) bool {
	if v, ok := n.Labels[v1.LabelNodeExcludeBalancers]; ok {
		b, err := strconv.ParseBool(v)
		return err == nil && !b
	}
	return true
}

// stableNode is the controller's stableNodeSetPredicates: not being
// deleted, not excluded by label, not tainted for deletion.
func stableNode(n *v1.Node) bool {
	if !n.DeletionTimestamp.IsZero() {
		return false
	}
	if !nodeIncluded(n) {
		return false
	}
	return !slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == toBeDeletedTaint })
}

// statusEqual is servicehelper.LoadBalancerStatusEqual.
func statusEqual(a, b *v1.LoadBalancerStatus) bool {
	return reflect.DeepEqual(a.Ingress, b.Ingress) || (len(a.Ingress) == 0 && len(b.Ingress) == 0)
}
