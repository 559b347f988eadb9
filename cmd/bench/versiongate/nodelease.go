package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/cmd/bench/internal/benchutil"
	"github.com/reconkit/reconkit/internal/servers"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
)

// nodeLeaseBackend is the Kubernetes store with records on node Leases:
// every node runs a nodestatus controller, which renews its Lease in
// kube-node-lease, and the node's store is wired to the controller's
// LeaseRenewal. Its wire count is both: what the host pays for its nodes
// and its gate together. With gates false, store starts the controller
// only, and returns nil: nodestatus alone.
type nodeLeaseBackend struct {
	*kubeBackend
	gates bool

	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newNodeLeaseBackend(ctx context.Context, a *servers.APIServer, gates bool) (*nodeLeaseBackend, error) {
	k, err := newKubeBackend(ctx, a)
	if err != nil {
		return nil, err
	}
	k.prefix = "bench-versiongate-nodelease"
	if !gates {
		k.prefix = "bench-versiongate-nodestatus"
	}
	return &nodeLeaseBackend{kubeBackend: k, gates: gates}, nil
}

func (b *nodeLeaseBackend) name() string {
	if !b.gates {
		return "nodestatus alone"
	}
	return "Kubernetes store, node Leases (+ nodestatus)"
}

// reset stops the controllers of the previous run; the Nodes and their
// Leases stay, and the next run's controllers adopt them. Each run has a
// gate of its own, so no record of an earlier run is in its way.
func (b *nodeLeaseBackend) reset(ctx context.Context) error {
	b.stop()
	b.mu.Lock()
	b.ctx, b.cancel = context.WithCancel(context.WithoutCancel(ctx))
	b.mu.Unlock()
	return b.kubeBackend.reset(ctx)
}

func (b *nodeLeaseBackend) stop() {
	b.mu.Lock()
	cancel := b.cancel
	b.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	b.wg.Wait()
}

func (b *nodeLeaseBackend) store(i int) (versiongate.Store, error) {
	if _, err := b.kubeBackend.store(i); err != nil { // makes the counted client
		return nil, err
	}
	cli := b.clients[i/nodesPerClient]
	name := fmt.Sprintf("node-%d", i)
	nc, err := nodestatus.New(nodestatus.Config{Client: cli, Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}})
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	ctx := b.ctx
	b.mu.Unlock()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		_ = nc.Run(ctx)
	}()
	// The first renewal: the store publishes only on a Lease its
	// heartbeat renewed.
	for {
		if _, _, ok := nc.LeaseRenewal(name); ok {
			break
		}
		if err := benchutil.Sleep(ctx, 20*time.Millisecond); err != nil {
			return nil, err
		}
	}
	if !b.gates {
		return nil, nil
	}
	return kubestore.New(kubestore.Config{Client: cli, Namespace: b.ns, Gate: fmt.Sprintf("bench%d", b.run),
		NodeLease: &kubestore.NodeLeaseConfig{Heartbeat: nc.LeaseRenewal}})
}

// nodestatusAlone runs n nodestatus controllers and counts their wire
// requests per node per minute over the window, after one TTL.
func nodestatusAlone(ctx context.Context, b *nodeLeaseBackend, n int, window time.Duration) (float64, error) {
	if err := b.reset(ctx); err != nil {
		return 0, err
	}
	defer b.stop()
	for i := range n {
		if _, err := b.store(i); err != nil {
			return 0, err
		}
	}
	if err := benchutil.Sleep(ctx, *ttl); err != nil {
		return 0, err
	}
	w0 := b.wire()
	if err := benchutil.Sleep(ctx, window); err != nil {
		return 0, err
	}
	return float64(b.wire()-w0) / (float64(n) * window.Minutes()), nil
}
