package lbwire_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/reconkit/reconkit/lbrecon/ccm/internal/lbwire"
)

// fake answers each verb as its fields say and records what it received.
type fake struct {
	status  *v1.LoadBalancerStatus
	err     error
	gotSvc  *v1.Service
	gotNode []*v1.Node
	gotCtx  context.Context
}

func (f *fake) GetLoadBalancer(ctx context.Context, _ string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	f.gotSvc, f.gotCtx = svc, ctx
	return f.status, f.status != nil, f.err
}

func (f *fake) GetLoadBalancerName(_ context.Context, cluster string, svc *v1.Service) string {
	return cluster + "/" + string(svc.UID)
}

func (f *fake) EnsureLoadBalancer(_ context.Context, _ string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	f.gotSvc, f.gotNode = svc, nodes
	return f.status, f.err
}

func (f *fake) UpdateLoadBalancer(_ context.Context, _ string, svc *v1.Service, nodes []*v1.Node) error {
	f.gotSvc, f.gotNode = svc, nodes
	return f.err
}

func (f *fake) EnsureLoadBalancerDeleted(_ context.Context, _ string, svc *v1.Service) error {
	f.gotSvc = svc
	return f.err
}

var _ cloudprovider.LoadBalancer = (*fake)(nil)

func serve(t *testing.T, f *fake) *lbwire.Client {
	srv := httptest.NewServer(lbwire.Handler(f))
	t.Cleanup(srv.Close)
	return &lbwire.Client{URL: srv.URL, HTTP: srv.Client()}
}

func svc() *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"}}
}

func TestCallsAndResultsCrossTheWire(t *testing.T) {
	f := &fake{status: &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "192.0.2.10"}}}}
	c := serve(t, f)
	ctx := t.Context()
	nodes := []*v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}

	st, err := c.EnsureLoadBalancer(ctx, "c", svc(), nodes)
	require.NoError(t, err)
	require.Equal(t, f.status, st)
	require.Equal(t, svc(), f.gotSvc)
	require.Equal(t, nodes, f.gotNode)

	st, exists, err := c.GetLoadBalancer(ctx, "c", svc())
	require.NoError(t, err)
	require.True(t, exists)
	require.Equal(t, f.status, st)

	require.Equal(t, "c/uid-1", c.GetLoadBalancerName(ctx, "c", svc()))
	require.NoError(t, c.UpdateLoadBalancer(ctx, "c", svc(), nodes))
	require.NoError(t, c.EnsureLoadBalancerDeleted(ctx, "c", svc()))
}

// The service controller honours a RetryError's delay: it must arrive as
// one, with its delay; other errors arrive as their message.
func TestErrorsCrossTheWire(t *testing.T) {
	f := &fake{}
	c := serve(t, f)
	ctx := t.Context()

	f.err = fmt.Errorf("pending: %w", api.NewRetryError("not converged yet", 1500*time.Millisecond))
	_, err := c.EnsureLoadBalancer(ctx, "c", svc(), nil)
	var re *api.RetryError
	require.ErrorAs(t, err, &re)
	require.Equal(t, 1500*time.Millisecond, re.RetryAfter())
	require.Equal(t, f.err.Error(), err.Error())

	f.err = errors.New("create server/n3: quota exceeded")
	err = c.UpdateLoadBalancer(ctx, "c", svc(), nil)
	require.EqualError(t, err, "create server/n3: quota exceeded")
	require.False(t, errors.As(err, &re), "not a RetryError")

	_, _, err = c.GetLoadBalancer(ctx, "c", svc())
	require.EqualError(t, err, "create server/n3: quota exceeded")
}

// A call whose caller goes away ends: the handler's context is cancelled.
func TestCallerGoneCancelsTheCall(t *testing.T) {
	block, started := make(chan struct{}), make(chan struct{})
	ended := make(chan error, 1)
	srv := httptest.NewServer(lbwire.Handler(blocking{block: block, started: started, ended: ended}))
	defer srv.Close()
	defer close(block)
	ctx, cancel := context.WithCancel(t.Context())
	c := &lbwire.Client{URL: srv.URL, HTTP: srv.Client()}
	done := make(chan error, 1)
	go func() { done <- c.EnsureLoadBalancerDeleted(ctx, "c", svc()) }()
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("the handler was not called")
	}
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(time.Minute):
		t.Fatal("the client's call did not end when its context did")
	}
	select {
	case err := <-ended:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(time.Minute):
		t.Fatal("the handler's call did not end when its caller went away")
	}
}

// blocking's EnsureLoadBalancerDeleted waits for its context or block.
type blocking struct {
	cloudprovider.LoadBalancer
	block   chan struct{}
	started chan struct{}
	ended   chan error
}

func (b blocking) EnsureLoadBalancerDeleted(ctx context.Context, _ string, _ *v1.Service) error {
	close(b.started)
	select {
	case <-ctx.Done():
		b.ended <- ctx.Err()
	case <-b.block:
	}
	return nil
}
