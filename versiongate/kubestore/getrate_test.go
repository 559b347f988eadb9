package kubestore_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
)

// reaperRequests runs a store that holds the reaper Lease while another
// node's record (15s TTL) is published and never kept alive, makes every
// watch of the reaper's client end at once with no event from then on (a
// proxy closing idle streams), and counts, per second of the bubble's
// clock over d, the reaper's requests about that node's record and
// heartbeat ("get fleet.node-b", "delete fleet-node-b", ...).
func reaperRequests(t *testing.T, d time.Duration) map[string]int {
	srv := kubefake.Config{}.NewServer()
	reaperClient, nodeClient := srv.NewClient(), srv.NewClient()
	node, err := kubestore.New(kubestore.Config{Client: nodeClient, Namespace: "agents", Gate: "fleet"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err = node.PublishRecord(ctx, "node-b", []byte("1.0.0"), 15*time.Second)
	require.NoError(t, err)
	reaper, err := kubestore.New(kubestore.Config{Client: reaperClient, Namespace: "agents", Gate: "fleet"})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, rev, err := reaper.ListRecords(ctx)
		if err != nil {
			return
		}
		_ = reaper.WatchRecords(ctx, rev, func([]versiongate.Record, int64) {})
	}()
	<-time.After(5 * time.Second) // it holds the reaper Lease and has listed the heartbeat
	synctest.Wait()

	var mu sync.Mutex
	counts := map[string]int{}
	reaperClient.PrependWatchReactor("*", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, watch.NewEmptyWatch(), nil // its result channel is closed
	})
	reaperClient.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if n, ok := a.(interface{ GetName() string }); ok && (a.GetVerb() == "get" || a.GetVerb() == "delete") {
			mu.Lock()
			counts[a.GetVerb()+" "+n.GetName()]++
			mu.Unlock()
		}
		return false, nil, nil
	})
	srv.EndWatches() // the open ones end too
	<-time.After(d)
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	return counts
}

// TestReapedRecordIsNotJudgedAgainWhileTheWatchIsBlind: the reaper
// deletes a dead node's heartbeat and record once, and sends nothing more
// about them while its record watch has not shown the deletion (every
// watch of its client ends at once with no event). It judged the record,
// still live in what its watch had shown, an orphan of the heartbeat it
// had deleted itself, and from a TTL and the margin later read the
// heartbeat (404) and deleted the record (404) again every reap interval,
// one GET and one DELETE a second for as long as the watch stayed blind
// (examples/nodeagent's TestFleetRollout: 56 GETs of one heartbeat in a
// minute under the nemesis' empty watches).
func TestReapedRecordIsNotJudgedAgainWhileTheWatchIsBlind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		counts := reaperRequests(t, 2*time.Minute)
		t.Logf("the reaper's requests about node-b in 2 minutes: %v", counts)
		require.Equal(t, 1, counts["delete fleet.node-b"], "the dead heartbeat is deleted once")
		require.Equal(t, 1, counts["delete fleet-node-b"], "the dead record is deleted once")
		require.Zero(t, counts["get fleet.node-b"], "no heartbeat read: the reaper deleted it itself")
	})
}
