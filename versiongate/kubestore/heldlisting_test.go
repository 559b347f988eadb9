package kubestore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/internal/storecheck"
	"github.com/reconkit/reconkit/versiongate/kubestore"
)

// A record deleted by hand while its heartbeat is renewed is held: the
// store that watched the deletion keeps listing it, and says so to the
// history's recorder, which marks it held (the model accepts a held record
// after its deletion, and no other). Once the heartbeat is gone, the
// deletion is reported and the listing no longer shows it.
func TestHeldRecordListedAsHeld(t *testing.T) {
	heldListingRound(t, kubefake.NewClientset(), "heldlist")
}

// The same on a real apiserver.
func TestHeldRecordListedAsHeldAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver (internal/testenv); skipped under -short")
	}
	heldListingRound(t, clientFor(t, apiServer(t)), uniqueGate("heldlist"))
}

func heldListingRound(t *testing.T, cs kubernetes.Interface, gate string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	clk := clocktesting.NewFakeClock(time.Now())
	rec := storecheck.NewRecorder(nil, storecheck.ValidatedAfterWrite(), storecheck.LostRecordsLinger())
	node := rec.Wrap("node", newStore(t, cs, gate, clk))
	watcher := newStore(t, cs, gate, clk)
	w := rec.Wrap("watcher", watcher)

	_, err := node.PublishRecord(ctx, "a", []byte("a"), 40*time.Second)
	require.NoError(t, err)
	_, rev, err := w.ListRecords(ctx)
	require.NoError(t, err)

	var mu sync.Mutex
	var deletions []int64
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = w.WatchRecords(wctx, rev, func(chs []versiongate.Record, rev int64) {
			for _, ch := range chs {
				if ch.ID == "a" && ch.Value == nil {
					mu.Lock()
					deletions = append(deletions, rev)
					mu.Unlock()
				}
			}
		})
	}()
	defer func() { stop(); wg.Wait() }()

	leases := cs.CoordinationV1().Leases(testNamespace)
	require.NoError(t, leases.Delete(ctx, gate+"-a", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, deleted, _ := kubestore.Seen(watcher, "a")
		return deleted
	}, time.Minute, 10*time.Millisecond, "the watcher sees the record deleted")
	// A store that did not watch the deletion lists no record: the
	// record is gone, for the history too.
	recs, _, err := rec.Wrap("observer", newStore(t, cs, gate, clk)).ListRecords(ctx)
	require.NoError(t, err)
	require.Empty(t, recs)

	lastList := func() storecheck.Op {
		h := rec.History()
		for i := len(h) - 1; i >= 0; i-- {
			if h[i].Input.Kind == storecheck.KindList {
				return h[i]
			}
		}
		t.Fatal("no listing recorded")
		return storecheck.Op{}
	}
	recs, _, err = w.ListRecords(ctx)
	require.NoError(t, err)
	require.Equal(t, []versiongate.Record{{ID: "a", Value: []byte("a")}}, recs, "the deleted record is listed while its heartbeat is there")
	require.Equal(t, []string{"a"}, lastList().Output.Held, "and marked held")
	mu.Lock()
	require.Empty(t, deletions, "no deletion reported while the heartbeat is there")
	mu.Unlock()

	// The node's keep-alive, finding its record lost, deletes its
	// heartbeat: at the next read of it, a third of the TTL after the
	// deletion was seen, the deletion is proven and reported.
	require.NoError(t, leases.Delete(ctx, gate+".a", metav1.DeleteOptions{}))
	clk.Step(14 * time.Second)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(deletions) == 1
	}, time.Minute, 10*time.Millisecond, "the deletion is reported once the heartbeat is gone")
	recs, _, err = w.ListRecords(ctx)
	require.NoError(t, err)
	require.Empty(t, recs)
	require.Empty(t, lastList().Output.Held)

	res, path, err := storecheck.Verify(rec.History(), t.TempDir())
	require.NoError(t, err)
	require.Equal(t, "Ok", string(res), "the history with a held listing is linearizable (visualization %s)", path)
}
