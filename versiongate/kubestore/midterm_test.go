package kubestore_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// midTerm is a gate "fleet" whose node "a" leads one term for as long as
// the test runs, on a client whose requests about the status Lease are
// counted.
type midTerm struct {
	srv       *kubefake.Server
	op        *kubefake.Client // the operator's
	gate      *versiongate.Gate
	campaigns atomic.Int64
	target    versiongate.Status

	mu      sync.Mutex
	status  []time.Time // instants of the leader's status requests
	spinCap int
}

// statusRequests returns how many status requests the leader sent in
// [from, to).
func (m *midTerm) statusRequests(from, to time.Time) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, at := range m.status {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// startMidTerm starts the leader and returns once its status is done.
// Past spinCap status requests the leader is stopped, so that a loop that
// spins fails the test (on its count) instead of hanging it.
func startMidTerm(t *testing.T, ctx context.Context, wg *sync.WaitGroup) *midTerm {
	m := &midTerm{srv: kubefake.Config{}.NewServer(), spinCap: 2000}
	gctx, halt := context.WithCancel(ctx)
	m.op = m.srv.NewClient()
	cl := m.srv.NewClient()
	record := func(a k8stesting.Action) {
		switch loopOf(a) {
		case "leader (status)", "status reads and watch":
		default:
			return
		}
		m.mu.Lock()
		m.status = append(m.status, time.Now())
		over := len(m.status) > m.spinCap
		m.mu.Unlock()
		if over {
			halt()
		}
	}
	cl.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) { record(a); return false, nil, nil })
	cl.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) { record(a); return false, nil, nil })
	st, err := kubestore.New(kubestore.Config{Client: cl, Namespace: testNamespace, Gate: "fleet"})
	require.NoError(t, err)
	m.target = statusAt(t, "2.0.0", versiongate.Release{Major: 2})
	m.gate, err = versiongate.New(versiongate.Config{
		Store: st, NodeID: "a", Version: version(t, "2.0.0"),
		MinimumCompatibleRelease: versiongate.Release{Major: 2},
		Candidate: versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) {
			return versiongatetest.NewTerm("a", 10+uint64(m.campaigns.Add(1))), nil
		}),
		Reconcile: func(context.Context, versiongate.Term) error { return nil },
	})
	require.NoError(t, err)
	wg.Add(1)
	go func() { defer wg.Done(); defer halt(); _ = m.gate.Run(gctx) }()
	require.NoError(t, versiongatetest.WaitPhase(ctx, m.gate, versiongate.PhaseDone))
	// A second on, so that what the test counts from now is apart from
	// the start's requests.
	<-time.After(time.Second)
	synctest.Wait()
	return m
}

// lease reads the status Lease as the operator sees it; nil if absent.
func (m *midTerm) lease(t *testing.T, ctx context.Context) *coordinationv1.Lease {
	l, err := m.op.CoordinationV1().Leases(testNamespace).Get(ctx, "fleet-status", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return l
}

// requireRecovered checks that the status Lease was created again, marked
// as deleted, and holds the leader's status again, all in its first term.
func (m *midTerm) requireRecovered(t *testing.T, ctx context.Context) {
	l := m.lease(t, ctx)
	require.NotNil(t, l, "the status Lease was not created again")
	require.Nil(t, l.DeletionTimestamp, "the status Lease is still being deleted")
	require.NotEmpty(t, l.Annotations[kubestore.AnnotationStatusDeleted], "the Lease created again reads as a first boot")
	require.Equal(t, []string{kubestore.Finalizer}, l.Finalizers)
	got, err := newStore(t, m.op, "fleet", nil).ReadStatus(ctx)
	require.NoError(t, err)
	st, err := versiongate.DecodeStatus(got.Value)
	require.NoError(t, err)
	require.Equal(t, m.target, st)
	require.Equal(t, int64(1), m.campaigns.Load(), "the status was recovered by a new term, not within the term")
}

// A status Lease deleted while its leader keeps its term (an operator's
// delete, held by the finalizer) is recovered within that term: the
// leader's periodic read-back finds it terminating, and the leader fences
// again with its own token, which finishes the deletion and creates the
// Lease again, marked as deleted; with no incompatible node it writes the
// status again. A node that starts after the delete passes WaitReady
// within a reconcile interval, where it used to wait until the next term.
// The recovery costs a handful of status requests, not a loop.
func TestLeaderRecoversStatusDeletedMidTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		m := startMidTerm(t, ctx, &wg)

		deleted := time.Now()
		require.NoError(t, m.op.CoordinationV1().Leases(testNamespace).Delete(ctx, "fleet-status", metav1.DeleteOptions{}))
		st, err := kubestore.New(kubestore.Config{Client: m.srv.NewClient(), Namespace: testNamespace, Gate: "fleet"})
		require.NoError(t, err)
		b, err := versiongate.New(versiongate.Config{
			Store: st, NodeID: "b", Version: version(t, "2.0.0"),
			MinimumCompatibleRelease: versiongate.Release{Major: 2},
			Candidate: versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			}),
			Reconcile: func(context.Context, versiongate.Term) error { return nil },
		})
		require.NoError(t, err)
		ready := make(chan error, 1)
		wg.Add(2)
		go func() { defer wg.Done(); _ = b.Run(ctx) }()
		go func() { defer wg.Done(); ready <- b.WaitReady(ctx) }()
		select {
		case err := <-ready:
			require.NoError(t, err)
		case <-time.After(5 * time.Minute):
			t.Fatalf("a node that started after the status Lease was deleted still waits, 5m later; the Lease: %+v", m.lease(t, ctx))
		}
		took := time.Since(deleted)
		synctest.Wait()
		sent := m.statusRequests(deleted, time.Now())
		t.Logf("node b ready %v after the delete; the leader sent %d status requests meanwhile", took, sent)
		// One reconcile interval (no jitter by default) to the read-back,
		// then the readiness wait's own backoff, up to 10s.
		require.LessOrEqual(t, took, versiongate.DefaultReconcileInterval+15*time.Second)
		m.requireRecovered(t, ctx)
		// The read-back (LIST); the fence (GET, update to finish the
		// deletion, GET, create); the read (LIST); the conditioned write
		// (GET, update, update).
		require.LessOrEqual(t, sent, 10)
	})
}

// The recovery refused, for as long as the obstacle lasts: another
// controller's finalizer on the status Lease, a namespace being deleted
// (creations refused with 403; the leader's removal of its finalizer is
// what lets the namespace's deletion finish), or 409 to every write of the
// status Lease. The leader keeps its term and retries with backoff: from
// 30s on, at most one status request a second (the project's budget for a
// persistent answer), never a spin. Once the
// obstacle goes, it recovers the status within its term.
func TestLeaderRecoveryRefusedKeepsItsBudget(t *testing.T) {
	for _, tc := range []struct {
		name  string
		block func(t *testing.T, ctx context.Context, m *midTerm)
		// gone says whether the status Lease is gone while blocked.
		gone  bool
		clear func(t *testing.T, ctx context.Context, m *midTerm)
	}{{
		name: "foreign finalizer",
		block: func(t *testing.T, ctx context.Context, m *midTerm) {
			l := m.lease(t, ctx)
			l.Finalizers = append(l.Finalizers, "example.com/keep")
			_, err := m.op.CoordinationV1().Leases(testNamespace).Update(ctx, l, metav1.UpdateOptions{})
			require.NoError(t, err)
		},
		clear: func(t *testing.T, ctx context.Context, m *midTerm) {
			l := m.lease(t, ctx)
			require.Equal(t, []string{"example.com/keep"}, l.Finalizers, "the leader left its own finalizer")
			l.Finalizers = nil
			_, err := m.op.CoordinationV1().Leases(testNamespace).Update(ctx, l, metav1.UpdateOptions{})
			require.NoError(t, err)
		},
	}, {
		name: "namespace being deleted",
		block: func(t *testing.T, ctx context.Context, m *midTerm) {
			m.srv.Inject(kubefake.Fault{Verb: "create", Namespace: testNamespace, Answer: kubefake.Fail(
				apierrors.NewForbidden(coordinationv1.Resource("leases"), "", errors.New("unable to create new content in namespace gates because it is being terminated")))})
		},
		gone: true,
		clear: func(t *testing.T, ctx context.Context, m *midTerm) {
			m.srv.ClearFaults()
			_, err := m.op.CoreV1().Namespaces().Get(ctx, testNamespace, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				_, err = m.op.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}, metav1.CreateOptions{})
			}
			require.NoError(t, err)
		},
	}, {
		name: "409",
		block: func(t *testing.T, ctx context.Context, m *midTerm) {
			m.srv.Inject(kubefake.Fault{Verb: "update", Resource: "leases", Name: "fleet-status", Answer: kubefake.Conflict()})
		},
		clear: func(t *testing.T, ctx context.Context, m *midTerm) { m.srv.ClearFaults() },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				defer wg.Wait()
				defer cancel()
				m := startMidTerm(t, ctx, &wg)
				tc.block(t, ctx, m)
				deleted := time.Now()
				require.NoError(t, m.op.CoordinationV1().Leases(testNamespace).Delete(ctx, "fleet-status", metav1.DeleteOptions{}))

				<-time.After(3 * time.Minute)
				synctest.Wait()
				// The read-back comes at most one reconcile interval after
				// the delete; the retries are counted from 30s after it.
				from := deleted.Add(versiongate.DefaultReconcileInterval + 30*time.Second)
				n := m.statusRequests(from, time.Now())
				t.Logf("status requests from %v to 3m after the delete: %d", from.Sub(deleted), n)
				require.LessOrEqual(t, n, int(time.Since(from)/time.Second), "the refused recovery spins")
				// Before that, the backoff's first, quicker retries: some
				// dozens of requests, where a spin sends thousands at once.
				early := m.statusRequests(deleted, from)
				t.Logf("status requests in the first %v after the delete: %d", from.Sub(deleted), early)
				require.LessOrEqual(t, early, 200, "the refused recovery spins")
				require.Positive(t, m.statusRequests(deleted, time.Now()), "the leader never noticed the delete")
				require.Equal(t, int64(1), m.campaigns.Load(), "a refused recovery ended the term")
				if tc.gone {
					require.Nil(t, m.lease(t, ctx), "the finalizer still holds the status Lease: the namespace cannot go")
				} else {
					l := m.lease(t, ctx)
					require.NotNil(t, l)
					require.NotNil(t, l.DeletionTimestamp)
				}

				tc.clear(t, ctx, m)
				require.NoError(t, versiongatetest.Wait(ctx, "the status recovered", func() bool {
					l := m.lease(t, ctx)
					return l != nil && l.DeletionTimestamp == nil && l.Annotations[kubestore.AnnotationValue] != "" && !slices.Contains(l.Finalizers, "example.com/keep")
				}, nil))
				m.requireRecovered(t, ctx)
			})
		})
	}
}

// A status Lease deleted while the leader waits to restrict (an old node
// still has its record) is found by the leader's own conditioned write,
// which gets ErrStatusDeleted once the old node goes: the leader fences
// again within its term instead of retrying the write on a Lease that only
// a Fence can recover, then writes its status.
func TestLeaderWriteFindsStatusDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		srv := kubefake.Config{}.NewServer()
		op := srv.NewClient()
		writeStatus(t, ctx, op, "fleet", 3, statusAt(t, "1.0.0", versiongate.Release{Major: 1}))
		seed := newStore(t, op, "fleet", nil)
		rec, err := versiongate.EncodeNodeRelease("old", version(t, "1.0.0"))
		require.NoError(t, err)
		oldLease, err := seed.PublishRecord(ctx, "old", rec, 40*time.Second)
		require.NoError(t, err)
		oldCtx, stopOld := context.WithCancel(ctx)
		wg.Add(1)
		go func() { // the old node's keep-alive
			defer wg.Done()
			for {
				select {
				case <-oldCtx.Done():
					return
				case <-time.After(10 * time.Second):
					_, _ = seed.KeepAlive(oldCtx, oldLease)
				}
			}
		}()

		var campaigns atomic.Int64
		st, err := kubestore.New(kubestore.Config{Client: srv.NewClient(), Namespace: testNamespace, Gate: "fleet"})
		require.NoError(t, err)
		target := statusAt(t, "2.0.0", versiongate.Release{Major: 2})
		g, err := versiongate.New(versiongate.Config{
			Store: st, NodeID: "a", Version: version(t, "2.0.0"),
			MinimumCompatibleRelease: versiongate.Release{Major: 2},
			Candidate: versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) {
				return versiongatetest.NewTerm("a", 10+uint64(campaigns.Add(1))), nil
			}),
			Reconcile: func(context.Context, versiongate.Term) error { return nil },
		})
		require.NoError(t, err)
		wg.Add(1)
		go func() { defer wg.Done(); _ = g.Run(ctx) }()
		require.NoError(t, versiongatetest.WaitBlocking(ctx, g, "old"))
		require.NoError(t, op.CoordinationV1().Leases(testNamespace).Delete(ctx, "fleet-status", metav1.DeleteOptions{}))
		<-time.After(time.Minute)
		stopOld()
		require.NoError(t, seed.DeleteRecord(ctx, oldLease))
		require.NoError(t, versiongatetest.WaitPhase(ctx, g, versiongate.PhaseDone))
		got, err := seed.ReadStatus(ctx)
		require.NoError(t, err)
		cur, err := versiongate.DecodeStatus(got.Value)
		require.NoError(t, err)
		require.Equal(t, target, cur)
		require.Equal(t, int64(1), campaigns.Load(), "recovered by a new term, not within the term")
	})
}
