package kubestore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

const nodeLeaseNamespace = "hb-node-leases"

// renewer stands in for nodestatus in the suite: it renews a node's
// Lease as nodestatus does (an update from its last copy; a conflict
// reads the Lease again), once each time the store asks for the node's
// heartbeat, so that a record the suite keeps alive is renewed and one it
// leaves is not.
type renewer struct {
	cs    kubernetes.Interface
	clock clock.Clock
	mu    sync.Mutex
	last  map[string]*coordinationv1.Lease
}

func newRenewer(cs kubernetes.Interface, clk clock.Clock) *renewer {
	return &renewer{cs: cs, clock: clk, last: map[string]*coordinationv1.Lease{}}
}

func (r *renewer) renew(node string) (time.Time, types.UID, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leases := r.cs.CoordinationV1().Leases(nodeLeaseNamespace)
	for range 5 {
		sent := r.clock.Now()
		cur := r.last[node]
		var l *coordinationv1.Lease
		var err error
		if cur == nil {
			if cur, err = leases.Get(ctx, node, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				l, err = leases.Create(ctx, &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Name: node},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node), LeaseDurationSeconds: ptr.To[int32](10),
						RenewTime: &metav1.MicroTime{Time: sent}},
				}, metav1.CreateOptions{})
			} else if err != nil {
				continue
			}
		}
		if l == nil && err == nil {
			next := cur.DeepCopy()
			next.Spec.RenewTime = &metav1.MicroTime{Time: sent}
			l, err = leases.Update(ctx, next, metav1.UpdateOptions{})
		}
		if err != nil {
			delete(r.last, node)
			continue
		}
		r.last[node] = l
		return sent, l.UID, true
	}
	return time.Time{}, "", false
}

func newNodeLeaseStore(t *testing.T, cs kubernetes.Interface, gate string, clk clock.WithTicker, hb func(string) (time.Time, types.UID, bool)) *kubestore.Store {
	t.Helper()
	st, err := kubestore.New(kubestore.Config{Client: cs, Namespace: testNamespace, Gate: gate, Clock: clk,
		NodeLease: &kubestore.NodeLeaseConfig{Namespace: nodeLeaseNamespace, Heartbeat: hb}})
	require.NoError(t, err)
	return st
}

func createNamespace(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Create(testCtx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// With records on node Leases the store passes the same suite on a real
// kube-apiserver: records are labels and annotations on Leases a
// heartbeat renews, expiry is judged on the suite's fake clock, and a
// dead record is removed from its Lease, which stays.
func TestNodeLeaseConformanceAPIServer(t *testing.T) {
	cfg := apiServer(t)
	cs := clientFor(t, cfg)
	createNamespace(t, cs, nodeLeaseNamespace)
	var clk *clocktesting.FakeClock
	versiongatetest.RunStoreConformance(t, versiongatetest.StoreHarness{
		New: func(t *testing.T) func() versiongate.Store {
			gate := uniqueGate("hbconf")
			clk = clocktesting.NewFakeClock(time.Now())
			c := clk
			r := newRenewer(cs, c)
			runWatch(t, newNodeLeaseStore(t, cs, gate, c, r.renew))
			return func() versiongate.Store { return newNodeLeaseStore(t, cs, gate, c, r.renew) }
		},
		Advance: func(d time.Duration) { clk.Step(d) },
	})
}

// And on kubefake, whose watches report a record leaving or entering the
// gate's label selector as DELETED or ADDED, as the apiserver's do.
func TestNodeLeaseConformanceKubefake(t *testing.T) {
	var clk *clocktesting.FakeClock
	versiongatetest.RunStoreConformance(t, versiongatetest.StoreHarness{
		New: func(t *testing.T) func() versiongate.Store {
			cs := kubefake.NewClientset()
			clk = clocktesting.NewFakeClock(time.Now())
			c := clk
			r := newRenewer(cs, c)
			runWatch(t, newNodeLeaseStore(t, cs, "hbconf", c, r.renew))
			return func() versiongate.Store { return newNodeLeaseStore(t, cs, "hbconf", c, r.renew) }
		},
		Advance: func(d time.Duration) { clk.Step(d) },
	})
}

// With nodestatus renewing the node's Lease on a real apiserver, the
// record survives its renewals (nodestatus updates from its last copy,
// which the record's write made stale: it reads the Lease again and
// keeps the label and annotation), the store's keep-alive sends nothing
// and counts from the renewal's send time, and a Lease deleted and
// created again (as the garbage collector and nodestatus do when a Node
// goes) loses the record: the keep-alive reports ErrRecordLost and a new
// publish takes the new Lease.
func TestNodeLeaseWithNodestatus(t *testing.T) {
	cfg := apiServer(t)
	cs := clientFor(t, cfg)
	ctx := testCtx(t)
	const node = "hb-node-1"
	nc, err := nodestatus.New(nodestatus.Config{
		Client: cs, Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}},
		LeaseDuration: 10 * time.Second, RenewInterval: time.Second,
	})
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- nc.Run(rctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	select {
	case <-nc.Ready():
	case <-ctx.Done():
		t.Fatal("nodestatus not ready")
	}
	waitRenewal := func(after time.Time) {
		t.Helper()
		require.Eventually(t, func() bool {
			s, _, ok := nc.LeaseRenewal(node)
			return ok && s.After(after)
		}, 30*time.Second, 10*time.Millisecond, "no lease renewal sent after %v", after)
	}

	gate := uniqueGate("hbns")
	ccs, counted := newCountingClient(cs)
	st, err := kubestore.New(kubestore.Config{Client: ccs, Namespace: testNamespace, Gate: gate,
		NodeLease: &kubestore.NodeLeaseConfig{Heartbeat: nc.LeaseRenewal}})
	require.NoError(t, err)
	createNamespace(t, cs, testNamespace)
	runWatch(t, st) // the reaper too sends nothing to node Leases
	l, err := st.PublishRecord(ctx, node, []byte("v1"), 10*time.Second)
	require.NoError(t, err)
	// The node Lease's duration, counted from the heartbeat's last send.
	require.LessOrEqual(t, l.TTL, 10*time.Second, "the node Lease's duration")
	require.Positive(t, l.TTL)
	published := time.Now()
	waitRenewal(published)
	waitRenewal(time.Now())
	lease, err := cs.CoordinationV1().Leases(kubestore.DefaultNodeLeaseNamespace).Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	rec, err := cs.CoordinationV1().Leases(testNamespace).Get(ctx, gate+"-"+node, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, b64("v1"), rec.Annotations[kubestore.AnnotationValue])
	require.Equal(t, kubestore.DefaultNodeLeaseNamespace+"/"+node+"/"+string(lease.UID), rec.Annotations[kubestore.AnnotationHeartbeat], "the record names the node Lease")
	rs, _, err := st.ListRecords(ctx)
	require.NoError(t, err)
	require.Equal(t, []versiongate.Record{{ID: node, Value: []byte("v1")}}, rs)

	// The TTL left counts from the last renewal's send time.
	before := time.Now()
	left, err := st.KeepAlive(ctx, l)
	require.NoError(t, err)
	sent, _, _ := nc.LeaseRenewal(node)
	require.LessOrEqual(t, left, 10*time.Second-before.Sub(sent)+time.Millisecond)

	// The Lease goes and comes back: the record names the old object.
	require.NoError(t, cs.CoordinationV1().Leases(kubestore.DefaultNodeLeaseNamespace).Delete(ctx, node, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := st.KeepAlive(ctx, l)
		return err != nil
	}, 30*time.Second, 10*time.Millisecond)
	_, err = st.KeepAlive(ctx, l)
	require.ErrorIs(t, err, versiongate.ErrRecordLost)
	// A publish replaces the orphan at once.
	require.Eventually(t, func() bool {
		_, err := st.PublishRecord(ctx, node, []byte("v2"), 10*time.Second)
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "publishing on the recreated Lease")
	rs, _, err = st.ListRecords(ctx)
	require.NoError(t, err)
	require.Equal(t, []versiongate.Record{{ID: node, Value: []byte("v2")}}, rs)
	require.Zero(t, counted.writesIn(kubestore.DefaultNodeLeaseNamespace), "the store wrote to node Leases")
	require.Positive(t, counted.writesIn(testNamespace))
}

// A dead record is deleted only while its node Lease is still what the
// reaper judged: the store cannot condition a delete on a node Lease, so
// the reaper reads it (GET, linearizable) first, and a renewal landing
// between the judgement and that read keeps the record. Unrenewed, the
// record goes and the node Lease, the node's, stays.
func TestNodeLeaseExpiryConditionedOnJudgedVersion(t *testing.T) {
	ctx := testCtx(t)
	cs := kubefake.NewClientset()
	clk := newFakeClock()
	r := newRenewer(cs, clk)
	node := newNodeLeaseStore(t, cs, "reap", clk, r.renew)
	ocs, oh := wrap(cs)
	observer := newNodeLeaseStore(t, ocs, "reap", clk, r.renew)
	l, err := node.PublishRecord(ctx, "n1", []byte("1.0.0"), 10*time.Second)
	require.NoError(t, err)
	var once, goneOnce sync.Once
	renewed, gone := make(chan struct{}), make(chan struct{})
	oh.set(func(h *hooks) {
		h.beforeGet = func(name string) error {
			if name == "n1" {
				once.Do(func() { r.renew(name); close(renewed) })
			}
			return nil
		}
		h.beforeDelete = func(name string) error {
			// The reaper may try again before its watch shows the first
			// delete: what counts is that it tried.
			if name == "reap-n1" {
				goneOnce.Do(func() { close(gone) })
			}
			return nil
		}
	})
	runWatch(t, observer)
	stepUntil(t, clk, renewed, "the reaper's read of the node Lease")
	rs, _, err := observer.ListRecords(ctx)
	require.NoError(t, err)
	require.Equal(t, []versiongate.Record{{ID: "n1", Value: []byte("1.0.0")}}, rs, "a record whose node Lease was renewed after it was judged stays")
	_, err = node.KeepAlive(ctx, l)
	require.NoError(t, err)
	stepUntil(t, clk, gone, "the reaper's delete of the record")
	require.Eventually(t, func() bool {
		rs, _, err := observer.ListRecords(ctx)
		return err == nil && len(rs) == 0
	}, time.Minute, 10*time.Millisecond)
	_, _, err = node.ListRecords(ctx)
	require.NoError(t, err)
	_, err = node.KeepAlive(ctx, l)
	require.ErrorIs(t, err, versiongate.ErrRecordLost, "its store's listing showed its record deleted")
	_, err = cs.CoordinationV1().Leases(nodeLeaseNamespace).Get(ctx, "n1", metav1.GetOptions{})
	require.NoError(t, err, "the node Lease is the node's: it is never deleted")
}

// A publish creates the record only if absent: another store's record
// created between the node Lease's read and the create refuses it, and
// the second publisher finds the record held.
func TestNodeLeasePublishConditionedOnRead(t *testing.T) {
	ctx := testCtx(t)
	cs := kubefake.NewClientset()
	clk := newFakeClock()
	r := newRenewer(cs, clk)
	first := newNodeLeaseStore(t, cs, "pub", clk, r.renew)
	raced := false
	scs, sh := wrap(cs)
	sh.set(func(h *hooks) {
		h.beforeCreate = func(l *coordinationv1.Lease) error {
			if !raced && l.Name == "pub-n1" {
				raced = true
				_, err := first.PublishRecord(ctx, "n1", []byte("first"), 10*time.Second)
				return err
			}
			return nil
		}
	})
	second := newNodeLeaseStore(t, scs, "pub", clk, r.renew)
	_, err := second.PublishRecord(ctx, "n1", []byte("second"), 10*time.Second)
	require.True(t, raced)
	require.ErrorIs(t, err, versiongate.ErrRecordHeld)
	rs, _, err := second.ListRecords(ctx)
	require.NoError(t, err)
	require.Equal(t, []versiongate.Record{{ID: "n1", Value: []byte("first")}}, rs)
}

// The keep-alive counts the TTL from the heartbeat's send time, never
// from now nor from the record's write (which renews nothing the reaper
// judges); a heartbeat of another Lease object, or none within the TTL,
// loses the record.
func TestNodeLeaseKeepAliveCountsFromSend(t *testing.T) {
	ctx := testCtx(t)
	cs := kubefake.NewClientset()
	clk := newFakeClock()
	r := newRenewer(cs, clk)
	var mu sync.Mutex
	var sent time.Time
	var uid types.UID
	hb := func(node string) (time.Time, types.UID, bool) {
		mu.Lock()
		defer mu.Unlock()
		return sent, uid, !sent.IsZero()
	}
	set := func(s time.Time, u types.UID) { mu.Lock(); sent, uid = s, u; mu.Unlock() }
	s0, u0, _ := r.renew("n1")
	set(s0, u0)
	st := newNodeLeaseStore(t, cs, "ka", clk, hb)
	clk.Step(time.Second)
	l, err := st.PublishRecord(ctx, "n1", []byte("v"), 10*time.Second)
	require.NoError(t, err)
	clk.Step(3 * time.Second)
	left, err := st.KeepAlive(ctx, l)
	require.NoError(t, err)
	require.Equal(t, 10*time.Second-clk.Since(s0), left, "counted from the heartbeat's send, not the record's later write")
	s1 := clk.Now().Add(-time.Second) // a renewal sent a second ago, answered now
	set(s1, u0)
	left, err = st.KeepAlive(ctx, l)
	require.NoError(t, err)
	require.Equal(t, 9*time.Second, left, "counted from the renewal's send time")
	clk.Step(9 * time.Second)
	_, err = st.KeepAlive(ctx, l)
	require.ErrorIs(t, err, versiongate.ErrRecordLost, "no renewal sent within the TTL")

	_, err = st.PublishRecord(ctx, "n1", []byte("v"), 10*time.Second)
	require.Error(t, err, "published with no renewal sent within the TTL")
	set(clk.Now().Add(-4*time.Second), u0)
	l, err = st.PublishRecord(ctx, "n1", []byte("v"), 10*time.Second)
	require.NoError(t, err, "this store's own lost record is replaced at once")
	require.Equal(t, 6*time.Second, l.TTL, "a publish's TTL counts from the heartbeat's last send: creating the record renews nothing")
	set(clk.Now(), "another-object")
	_, err = st.KeepAlive(ctx, l)
	require.ErrorIs(t, err, versiongate.ErrRecordLost, "the heartbeat renews another Lease object")
}

// A gate that lost its record on its own deadline (a keep-alive answered
// late, a heartbeat stalled behind a partition) neither deletes it nor
// tells the store, and the heartbeat renews the Lease again once it can,
// so no observer ever judges the record dead: the store's own record must
// not hold the gate's next publish, and the lost lease reports
// ErrRecordLost.
func TestNodeLeaseOwnRecordRepublished(t *testing.T) {
	ctx := testCtx(t)
	cs := kubefake.NewClientset()
	clk := newFakeClock()
	r := newRenewer(cs, clk)
	st := newNodeLeaseStore(t, cs, "again", clk, r.renew)
	old, err := st.PublishRecord(ctx, "n1", []byte("v1"), 10*time.Second)
	require.NoError(t, err)
	_, err = st.KeepAlive(ctx, old) // renews, as the heartbeat goes on
	require.NoError(t, err)
	l, err := st.PublishRecord(ctx, "n1", []byte("v2"), 10*time.Second)
	require.NoError(t, err, "the gate publishing again after its own deadline")
	rs, _, err := st.ListRecords(ctx)
	require.NoError(t, err)
	require.Equal(t, []versiongate.Record{{ID: "n1", Value: []byte("v2")}}, rs)
	_, err = st.KeepAlive(ctx, old)
	require.ErrorIs(t, err, versiongate.ErrRecordLost, "the abandoned lease")
	_, err = st.KeepAlive(ctx, l)
	require.NoError(t, err)
}
