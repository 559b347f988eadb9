package kubestore_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// A leader that dies between its conditioned write and the validation
// (here: cut off, so that neither the LIST nor the revert goes through)
// leaves the restricted status marked unvalidated. Joiners meanwhile read
// it restricted and wait. The next term's Fence puts the replaced value
// back, so that no leader takes an unvalidated restriction for an
// established one while a missed old node may serve.
func TestUnvalidatedWriteUndoneByNextFence(t *testing.T) {
	ctx := testCtx(t)
	cs := kubefake.NewClientset()
	r := newRound(t, ctx, cs, "crash")
	r.lh.set(func(h *hooks) {
		h.beforeList = func(opts *metav1.ListOptions) error {
			if isRecordList(opts) {
				h.cut.Store(true) // the leader is gone from here on
				return errCut
			}
			return nil
		}
	})
	// A joiner that the leader's listing did not show.
	saw, err := r.join(ctx)
	require.NoError(t, err)
	require.Equal(t, open, saw)

	err = r.leader.WriteStatus(ctx, r.term, []byte(restricted), r.rev)
	require.ErrorIs(t, err, errCut)
	require.NotErrorIs(t, err, versiongate.ErrNodesChanged)
	st, err := r.joiner.ReadStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, restricted, string(st.Value), "the unvalidated write stays: joiners that read it wait")
	l, err := cs.CoordinationV1().Leases(testNamespace).Get(ctx, "crash-status", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, b64(open), l.Annotations[kubestore.AnnotationUnvalidated])

	next := newStore(t, cs, "crash", nil)
	require.NoError(t, next.Fence(ctx, versiongatetest.NewTerm("next", 4)))
	st, err = next.ReadStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, open, string(st.Value), "the next term undid the unvalidated restriction")
	l, err = cs.CoordinationV1().Leases(testNamespace).Get(ctx, "crash-status", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotContains(t, l.Annotations, kubestore.AnnotationUnvalidated)
}

// A validated write drops its mark, so the next term keeps it.
func TestValidatedWriteKeptByNextFence(t *testing.T) {
	ctx := testCtx(t)
	cs := kubefake.NewClientset()
	r := newRound(t, ctx, cs, "kept")
	require.NoError(t, r.leader.WriteStatus(ctx, r.term, []byte(restricted), r.rev))
	next := newStore(t, cs, "kept", nil)
	require.NoError(t, next.Fence(ctx, versiongatetest.NewTerm("next", 4)))
	st, err := next.ReadStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, restricted, string(st.Value))
}

// The reaper deletes a dead record's heartbeat only if it is still what
// it judged: one renewed between the judgement and the delete stays, with
// its record, and its node keeps it. Unrenewed, the heartbeat goes, then
// the record, and the node's next keep-alive reports ErrRecordLost.
func TestReapConditionedOnJudgedVersion(t *testing.T) {
	ctx := testCtx(t)
	cs := kubefake.NewClientset()
	clk := newFakeClock()
	node := newStore(t, cs, "reap", clk)
	ocs, oh := wrap(cs)
	observer := newStore(t, ocs, "reap", clk)
	l, err := node.PublishRecord(ctx, "n1", []byte("1.0.0"), 10*time.Second)
	require.NoError(t, err)
	var mu sync.Mutex
	var deletes []string
	renewed, gone := make(chan struct{}), make(chan struct{})
	closed := false
	oh.set(func(h *hooks) {
		h.beforeDelete = func(name string) error {
			mu.Lock()
			defer mu.Unlock()
			deletes = append(deletes, name)
			switch {
			case name == "reap.n1" && len(deletes) == 1:
				_, err := node.KeepAlive(ctx, l)
				close(renewed)
				return err
			case name == "reap-n1" && !closed:
				// The reaper may try again before its watch shows the
				// first delete: what counts is that it tried.
				closed = true
				close(gone)
			}
			return nil
		}
	})
	runWatch(t, observer) // the only store watching: the reaper
	stepUntil(t, clk, renewed, "the reaper's delete of the heartbeat")
	rs, _, err := observer.ListRecords(ctx)
	require.NoError(t, err)
	require.Equal(t, []versiongate.Record{{ID: "n1", Value: []byte("1.0.0")}}, rs, "a record renewed after it was judged stays")
	_, err = node.KeepAlive(ctx, l)
	require.NoError(t, err)

	stepUntil(t, clk, gone, "the reaper's delete of the record")
	mu.Lock()
	require.Equal(t, []string{"reap.n1", "reap-n1"}, deletes[len(deletes)-2:], "the heartbeat first, then the record")
	mu.Unlock()
	_, err = node.KeepAlive(ctx, l)
	require.ErrorIs(t, err, versiongate.ErrRecordLost)
	// gone is closed by the hook that runs before the record's delete is
	// applied: the listing may show it a moment longer.
	require.Eventually(t, func() bool {
		rs, _, err := observer.ListRecords(ctx)
		return err == nil && len(rs) == 0
	}, time.Minute, 10*time.Millisecond, "the record deleted")
}

// Every failure names the verb and the object; a 403 says which RBAC verb
// is missing, and a 404 for the API says the server does not serve it.
func TestErrorsNameVerbAndObject(t *testing.T) {
	ctx := testCtx(t)
	cs := kubefake.NewClientset()
	cs.PrependReactor("list", "leases", func(a k8stestingAction) (bool, runtimeObject, error) {
		return true, nil, apiForbidden("leases", "list")
	})
	cs.PrependReactor("get", "leases", func(a k8stestingAction) (bool, runtimeObject, error) {
		return true, nil, apiNotServed()
	})
	st := newStore(t, cs, "err", nil)
	_, _, err := st.ListRecords(ctx)
	require.ErrorContains(t, err, `versiongate/kubestore: list Leases in gates`)
	require.ErrorContains(t, err, `RBAC: the client needs the verb "list" on leases.coordination.k8s.io in namespace gates`)
	_, err = st.ReadStatus(ctx)
	require.ErrorContains(t, err, "versiongate/kubestore: list Leases in gates (selector metadata.name=err-status)")
	require.ErrorContains(t, err, `RBAC: the client needs the verb "list"`)
	err = st.Fence(ctx, versiongatetest.NewTerm("l", 3))
	require.ErrorContains(t, err, "versiongate/kubestore: get Lease gates/err-status")
	require.ErrorContains(t, err, "the server does not serve coordination.k8s.io/v1 leases")
	_, err = st.PublishRecord(ctx, "Bad_Name", []byte("x"), time.Second)
	require.ErrorContains(t, err, `record ID "Bad_Name" makes the Lease name "err-Bad_Name", which is not a valid object name`)
	_, err = st.PublishRecord(ctx, "status", []byte("x"), time.Second)
	require.ErrorContains(t, err, "is reserved for the Lease err-status")
	_, err = st.PublishRecord(ctx, "reaper", []byte("x"), time.Second)
	require.ErrorContains(t, err, "is reserved for the Lease err-reaper")
	_, err = kubestore.New(kubestore.Config{Client: cs, Namespace: testNamespace, Gate: "Bad"})
	require.ErrorIs(t, err, versiongate.ErrInvalidConfig)
	require.True(t, errors.Is(err, versiongate.ErrInvalidConfig))
}
