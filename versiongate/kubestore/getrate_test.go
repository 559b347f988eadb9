package kubestore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
)

// reaperRequests runs a store that holds the reaper Lease while another
// node's record (15s TTL) is published and never kept alive; then world
// changes the world (the server's faults, the node's Leases) and, if
// blind, every watch of the reaper's client ends at once with no event
// from then on (a proxy closing idle streams). It counts the reaper's
// requests about that node's record and heartbeat over the next d of the
// bubble's clock ("get fleet.node-b", "delete fleet-node-b", ...). Then,
// if after is set, its watches last again and after is given the reaper
// 30s later.
func reaperRequests(t *testing.T, d time.Duration, blind bool, world func(*kubefake.Server, *kubefake.Client), after func(*kubestore.Store)) map[string]int {
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
	// The reactors go in before any request: the fake's reactor chain is
	// not safe to change while requests are served.
	var mu sync.Mutex
	counts := map[string]int{}
	var counting, blinded atomic.Bool
	reaperClient.PrependWatchReactor("*", func(k8stesting.Action) (bool, watch.Interface, error) {
		if !blinded.Load() {
			return false, nil, nil
		}
		return true, watch.NewEmptyWatch(), nil // its result channel is closed
	})
	reaperClient.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if n, ok := a.(interface{ GetName() string }); ok && counting.Load() && (a.GetVerb() == "get" || a.GetVerb() == "delete") {
			mu.Lock()
			counts[a.GetVerb()+" "+n.GetName()]++
			mu.Unlock()
		}
		return false, nil, nil
	})
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
	counting.Store(true)
	world(srv, nodeClient)
	if blind {
		blinded.Store(true)
		srv.EndWatches() // the open ones end too
	}
	<-time.After(d)
	counting.Store(false)
	if after != nil {
		blinded.Store(false)
		srv.EndWatches() // opened again from the revision last seen, they show the deletions
		<-time.After(30 * time.Second)
		synctest.Wait()
		after(reaper)
	}
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
		reaped := -1
		counts := reaperRequests(t, 2*time.Minute, true, func(*kubefake.Server, *kubefake.Client) {},
			func(s *kubestore.Store) { reaped = kubestore.Reaped(s) })
		t.Logf("the reaper's requests about node-b in 2 minutes: %v", counts)
		require.Equal(t, 1, counts["delete fleet.node-b"], "the dead heartbeat is deleted once")
		require.Equal(t, 1, counts["delete fleet-node-b"], "the dead record is deleted once")
		require.Zero(t, counts["get fleet.node-b"], "no heartbeat read: the reaper deleted it itself")
		require.Zero(t, reaped, "once the watch shows the deletion, the reaper forgets the record")
	})
}

// TestFailedOrphanJobIsJudgedAgainATTLLater: a record the reaper judges an
// orphan, whose heartbeat's read or whose delete keeps failing (500), is
// tried again its TTL and the margin later, not every reap interval: over
// 2 minutes at most one try per 16.5s (15s records), where it read the
// heartbeat, or read it and deleted the record, once a second.
func TestFailedOrphanJobIsJudgedAgainATTLLater(t *testing.T) {
	const d = 2 * time.Minute
	limit := int(d/(15*time.Second+1500*time.Millisecond)) + 1
	for _, c := range []struct {
		name  string
		blind bool
		world func(*kubefake.Server, *kubefake.Client)
	}{
		// The record watch shows nothing: the record the reaper could not
		// delete stays live in what it saw, an orphan of the heartbeat it
		// deleted.
		{"record delete refused, watch blind", true, func(srv *kubefake.Server, _ *kubefake.Client) {
			srv.Inject(kubefake.Fault{Verb: "delete", Resource: "leases", Name: "fleet-node-b", Answer: kubefake.InternalError()})
		}},
		// An operator deleted the heartbeat: the record is an orphan,
		// and the read of its heartbeat fails.
		{"heartbeat read fails", false, func(srv *kubefake.Server, node *kubefake.Client) {
			require.NoError(t, node.CoordinationV1().Leases("agents").Delete(context.Background(), "fleet.node-b", metav1.DeleteOptions{}))
			srv.Inject(kubefake.Fault{Verb: "get", Resource: "leases", Name: "fleet.node-b", Answer: kubefake.InternalError()})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				counts := reaperRequests(t, d, c.blind, c.world, nil)
				t.Logf("the reaper's requests about node-b in %v: %v", d, counts)
				require.Positive(t, counts["get fleet.node-b"], "the orphan is judged")
				require.LessOrEqual(t, counts["get fleet.node-b"], limit, "reads of the orphan's heartbeat")
				require.LessOrEqual(t, counts["delete fleet-node-b"], limit, "deletes of the orphan")
			})
		})
	}
}
