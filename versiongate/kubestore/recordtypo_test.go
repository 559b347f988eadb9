package kubestore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// A record whose value an operator left not base64 (or empty) is no
// deleted record: read as one, its node, still serving an old release,
// would count as gone and the leader would raise the minimum under it.
// The store reports it corrupt (Corrupt wrapping ErrCorruptRecord), the
// leader counts it as a node of unknown release and keeps waiting, and
// the record's owner writes its value back at its first keep-alive after
// its store saw the edit.
func TestNonBase64RecordBlocksUntilRepaired(t *testing.T) {
	for _, typo := range []string{"not base64!", ""} {
		t.Run(fmt.Sprintf("%q", typo), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				typoRound(t, kubefake.NewClientset(), "typo", typo, func() {
					time.Sleep(2 * time.Minute)
					synctest.Wait()
				})
			})
		})
	}
}

// The same on a real apiserver, in real time.
func TestNonBase64RecordBlocksUntilRepairedAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver (internal/testenv); skipped under -short")
	}
	cs := clientFor(t, apiServer(t))
	typoRound(t, cs, uniqueGate("typo"), "not base64!", nil)
}

// typoRound publishes an old node's record (1.0, 40s records, kept alive
// by hand, its store not watching) and runs a new-release leader that
// must restrict; once the leader waits for the old node, it replaces the
// record's value annotation by typo, and checks that the leader keeps
// waiting (after settle, if not nil; otherwise for 3s of real time, far
// past the moment the leader wrote without this guard), then that the
// owner repairs the record at its next keep-alive.
func typoRound(t *testing.T, cs kubernetes.Interface, gate, typo string, settle func()) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writeStatus(t, ctx, cs, gate, 3, statusAt(t, "1.0.0", versiongate.Release{Major: 1}))
	owner := newStore(t, cs, gate, nil)
	value, err := versiongate.EncodeNodeRelease("old", version(t, "1.0.0"))
	require.NoError(t, err)
	lease, err := owner.PublishRecord(ctx, "old", value, 40*time.Second)
	require.NoError(t, err)

	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	var kaMu sync.Mutex // serialises the keep-alives below with the test's own
	keepAlive := func() error {
		kaMu.Lock()
		defer kaMu.Unlock()
		_, err := owner.KeepAlive(ctx, lease)
		return err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Second):
			}
			_ = keepAlive()
		}
	}()

	var token atomic.Uint64
	token.Store(10)
	var reconciles atomic.Int64
	leader, err := versiongate.New(versiongate.Config{
		Store: newStore(t, cs, gate, nil), NodeID: "new", Version: version(t, "2.0.0"),
		MinimumCompatibleRelease: versiongate.Release{Major: 2}, RecordTTL: 40 * time.Second,
		Candidate: versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) {
			return versiongatetest.NewTerm("new", token.Add(1)), nil
		}),
		Reconcile: func(context.Context, versiongate.Term) error { reconciles.Add(1); return nil },
	})
	require.NoError(t, err)
	wg.Add(1)
	go func() { defer wg.Done(); _ = leader.Run(ctx) }()
	blocking := func() string { return fmt.Sprint(leader.Blocking()) }
	require.Eventually(t, func() bool { return blocking() == "[old@1.0.0]" }, time.Minute, 10*time.Millisecond, "the leader waits for the old node")

	leases := cs.CoordinationV1().Leases(testNamespace)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, kubestore.AnnotationValue, typo)
	_, err = leases.Patch(ctx, gate+"-old", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return blocking() == "[old@unknown]" }, time.Minute, 10*time.Millisecond, "the leader counts the record as unknown")
	if settle != nil {
		settle()
	} else {
		require.Never(t, func() bool { return reconciles.Load() > 0 }, 3*time.Second, 50*time.Millisecond)
	}
	require.Zero(t, reconciles.Load(), "the leader reconciled while the old node's record was corrupt")
	require.Equal(t, "[old@unknown]", blocking())
	st, err := newStore(t, cs, gate, nil).ReadStatus(ctx)
	require.NoError(t, err)
	got, err := versiongate.DecodeStatus(st.Value)
	require.NoError(t, err)
	require.Equal(t, versiongate.Release{Major: 1}, got.MinimumCompatibleRelease, "the minimum was raised under a node whose record was corrupt")

	// The store reports the record, corrupt; its owner, having seen that,
	// writes its value back at its next keep-alive.
	recs, _, err := owner.ListRecords(ctx)
	require.NoError(t, err)
	var corrupt error
	for _, r := range recs {
		if r.ID == "old" {
			corrupt = r.Corrupt
		}
	}
	require.ErrorIs(t, corrupt, versiongate.ErrCorruptRecord)
	require.NoError(t, keepAlive())
	l, err := leases.Get(ctx, gate+"-old", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, b64(string(value)), l.Annotations[kubestore.AnnotationValue], "the owner did not repair its record")
	require.Eventually(t, func() bool { return blocking() == "[old@1.0.0]" }, time.Minute, 10*time.Millisecond, "the leader sees the repaired record")

	require.NoError(t, owner.DeleteRecord(ctx, lease))
	require.NoError(t, versiongatetest.WaitPhase(ctx, leader, versiongate.PhaseDone))
	require.Positive(t, reconciles.Load())
}
