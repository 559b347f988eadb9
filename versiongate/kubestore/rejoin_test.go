package kubestore_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// A node's record Lease, or its heartbeat Lease, deleted by an operator
// while the node runs (RejoinAfterRecordLoss, default 10s records) is
// published again: the node learns of the loss at its next keep-alive (a
// third of the TTL), stops serving on the lost record, and publishes a new
// one, a record and a heartbeat of new objects. Measured: within the TTL
// of the delete, and at most 30 requests of the node meanwhile, all its
// loops included (keep-alives, the publish, the reaper's renewal, its
// watches reopened).
func TestRecordOrHeartbeatDeletedMidHeartbeatIsPublishedAgain(t *testing.T) {
	for _, del := range []string{"record", "heartbeat"} {
		t.Run(del, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := kubefake.Config{}.NewServer()
				cl := srv.NewClient()
				var sent atomic.Int64
				cl.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) { sent.Add(1); return false, nil, nil })
				cl.PrependWatchReactor("*", func(k8stesting.Action) (bool, watch.Interface, error) { sent.Add(1); return false, nil, nil })
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				var wg sync.WaitGroup
				defer wg.Wait()
				defer cancel()
				rejoinRound(t, ctx, &wg, cl, srv.NewClient(), testNamespace, "fleet", del, &sent)
			})
		})
	}
}

// TestRecordOrHeartbeatDeletedMidHeartbeatIsPublishedAgain on a real
// apiserver, whose deletions and watches are the real ones.
func TestRecordOrHeartbeatDeletedMidHeartbeatIsPublishedAgainAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver (internal/testenv); skipped under -short")
	}
	cfg := apiServer(t)
	admin := clientFor(t, cfg)
	for _, del := range []string{"record", "heartbeat"} {
		t.Run(del, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			var wg sync.WaitGroup
			defer wg.Wait()
			defer cancel()
			var sent atomic.Int64
			ncfg := rest.CopyConfig(cfg)
			ncfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, n: &sent} })
			ns := "rejoin-" + del
			createNamespace(t, admin, ns)
			rejoinRound(t, ctx, &wg, clientFor(t, ncfg), admin, ns, uniqueGate("rejoin"), del, &sent)
		})
	}
}

// rejoiningGate is node "a" of gate in ns on cs, release 2.0.0, the only
// one, with RejoinAfterRecordLoss: it publishes its record again after
// each loss.
func rejoiningGate(t *testing.T, cs kubernetes.Interface, ns, gate string) *versiongate.Gate {
	t.Helper()
	st, err := kubestore.New(kubestore.Config{Client: cs, Namespace: ns, Gate: gate})
	require.NoError(t, err)
	var terms atomic.Uint64
	g, err := versiongate.New(versiongate.Config{
		Store: st, NodeID: "a", Version: version(t, "2.0.0"),
		MinimumCompatibleRelease: versiongate.Release{Major: 2},
		Candidate: versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) {
			return versiongatetest.NewTerm("a", 10+terms.Add(1)), nil
		}),
		Reconcile:             func(context.Context, versiongate.Term) error { return nil },
		RejoinAfterRecordLoss: true,
	})
	require.NoError(t, err)
	return g
}

// rejoinRound runs node "a" of gate in ns on cs until its status is done,
// deletes its record ("record") or its heartbeat ("heartbeat") through
// op, and checks that both are published again, as new objects, within
// the budget; sent counts the node's requests.
func rejoinRound(t *testing.T, ctx context.Context, wg *sync.WaitGroup, cs, op kubernetes.Interface, ns, gate, del string, sent *atomic.Int64) {
	g := rejoiningGate(t, cs, ns, gate)
	wg.Add(1)
	// The node's log (gate and store) is printed if the round fails (a
	// record never published again was seen once, under load, with
	// nothing to say why; its cause is staged by
	// TestRecordDeletedBeforeItsCreateAnsweredIsPublishedAgain).
	go func() { defer wg.Done(); _ = g.Run(logr.NewContext(ctx, testr.New(t))) }()
	require.NoError(t, versiongatetest.WaitPhase(ctx, g, versiongate.PhaseDone))

	leases := op.CoordinationV1().Leases(ns)
	uid := func(name string) types.UID {
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return ""
		}
		require.NoError(t, err)
		return l.UID
	}
	// The heartbeat Lease is written by a loop of its own, which may not
	// have run yet when the phase reads done.
	rec, hb := uid(gate+"-a"), uid(gate+".a")
	for rec == "" || hb == "" {
		select {
		case <-ctx.Done():
			t.Fatalf("node a is done but its record (%q) or heartbeat (%q) Lease is missing", rec, hb)
		case <-time.After(100 * time.Millisecond):
		}
		rec, hb = uid(gate+"-a"), uid(gate+".a")
	}
	name := gate + "-a"
	if del == "heartbeat" {
		name = gate + ".a"
	}
	before, deleted := sent.Load(), time.Now()
	require.NoError(t, leases.Delete(ctx, name, metav1.DeleteOptions{}))
	for {
		r, h := uid(gate+"-a"), uid(gate+".a")
		if r != "" && r != rec && h != "" && h != hb {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the %s deleted %v ago was not published again (record %q, heartbeat %q)", del, time.Since(deleted), r, h)
		case <-time.After(100 * time.Millisecond):
		}
	}
	took, n := time.Since(deleted), sent.Load()-before
	t.Logf("%s deleted: published again %v after, with %d requests of the node meanwhile", del, took, n)
	require.LessOrEqual(t, took, versiongate.DefaultRecordTTL)
	require.LessOrEqual(t, n, int64(30))
}

// The wedge TestRecordOrHeartbeatDeletedMidHeartbeatIsPublishedAgain met
// once under load, staged: the record is deleted after the server created
// it and before the publisher read the answer, once the gate, which does
// not wait for its own publish to reach Done, is done, and the store's
// watch shows the deletion before the publisher registers the record. The
// node must still learn of the loss and publish again; it did not, its
// heartbeat renewed for ever, when the store registered its record only
// after the create's answer.
func TestRecordDeletedBeforeItsCreateAnsweredIsPublishedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := kubefake.Config{}.NewServer()
		cl, op := srv.NewClient(), srv.NewClient()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		leases := op.CoordinationV1().Leases(testNamespace)
		var g *versiongate.Gate
		var first types.UID
		var hookErr error
		hc := hookedClient{Interface: cl, after: func(l *coordinationv1.Lease) {
			if l.Name != "fleet-a" || first != "" {
				return
			}
			first = l.UID
			if hookErr = versiongatetest.WaitPhase(ctx, g, versiongate.PhaseDone); hookErr != nil {
				return
			}
			hookErr = leases.Delete(ctx, l.Name, metav1.DeleteOptions{})
			synctest.Wait() // the store's watch has shown the deletion
		}}
		g = rejoiningGate(t, hc, testNamespace, "fleet")
		wg.Add(1)
		go func() { defer wg.Done(); _ = g.Run(logr.NewContext(ctx, testr.New(t))) }()
		for {
			l, err := leases.Get(ctx, "fleet-a", metav1.GetOptions{})
			if err == nil && first != "" && l.UID != first {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the record deleted before its create answered was not published again (first %q, now %v)", first, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
		require.NoError(t, hookErr)
	})
}
