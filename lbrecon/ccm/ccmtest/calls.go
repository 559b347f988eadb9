package ccmtest

import (
	"context"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// Calls counts the load-balancer calls the controller made, by method.
type Calls struct {
	Get, Name, Ensure, Update, Delete int64
}

// Total is the number of calls of every method.
func (c Calls) Total() int64 { return c.Get + c.Name + c.Ensure + c.Update + c.Delete }

// tracker is the Balancer the controller's calls reach: it counts them
// and those in flight, so that a stopped controller's last calls are
// waited for.
type tracker struct {
	lb cloudprovider.LoadBalancer

	get, name, ensure, update, del atomic.Int64

	mu       sync.Mutex
	inFlight int
	idle     chan struct{} // closed when inFlight drops to 0; nil while nobody waits
}

var _ cloudprovider.LoadBalancer = (*tracker)(nil)

func (t *tracker) calls() Calls {
	return Calls{Get: t.get.Load(), Name: t.name.Load(), Ensure: t.ensure.Load(), Update: t.update.Load(), Delete: t.del.Load()}
}

// drained returns a channel closed once no call is in flight.
func (t *tracker) drained() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inFlight == 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if t.idle == nil {
		t.idle = make(chan struct{})
	}
	return t.idle
}

func (t *tracker) enter(n *atomic.Int64) func() {
	n.Add(1)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inFlight++
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.inFlight--
		if t.inFlight == 0 && t.idle != nil {
			close(t.idle)
			t.idle = nil
		}
	}
}

func (t *tracker) GetLoadBalancer(ctx context.Context, cluster string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	defer t.enter(&t.get)()
	return t.lb.GetLoadBalancer(ctx, cluster, svc)
}

func (t *tracker) GetLoadBalancerName(ctx context.Context, cluster string, svc *v1.Service) string {
	defer t.enter(&t.name)()
	return t.lb.GetLoadBalancerName(ctx, cluster, svc)
}

func (t *tracker) EnsureLoadBalancer(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	defer t.enter(&t.ensure)()
	return t.lb.EnsureLoadBalancer(ctx, cluster, svc, nodes)
}

func (t *tracker) UpdateLoadBalancer(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) error {
	defer t.enter(&t.update)()
	return t.lb.UpdateLoadBalancer(ctx, cluster, svc, nodes)
}

func (t *tracker) EnsureLoadBalancerDeleted(ctx context.Context, cluster string, svc *v1.Service) error {
	defer t.enter(&t.del)()
	return t.lb.EnsureLoadBalancerDeleted(ctx, cluster, svc)
}
