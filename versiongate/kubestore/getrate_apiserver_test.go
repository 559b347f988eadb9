package kubestore_test

import (
	"context"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
)

// TestReapedRecordIsNotJudgedAgainWhileTheWatchIsBlind on a real
// kube-apiserver: the reaper deletes a dead node's heartbeat and record
// once, and sends nothing more about them while every watch of its client
// ends at once with no event (a proxy closing idle streams), though the
// record stays live in what its watch last showed; once its watches last
// again, it forgets the record.
func TestReapedRecordIsNotJudgedAgainWhileTheWatchIsBlindOnTheAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver (internal/testenv); skipped under -short")
	}
	const (
		gate = "blindreap"
		ttl  = 8 * time.Second
		// quiet is how long after its deletes the reaper must send
		// nothing about the record: the old reaper judged it again every
		// second (reapInterval) from a TTL and the margin later.
		quiet = 2 * (ttl + time.Second)
	)
	a := testenv.APIServer(t)
	ctx := testCtx(t)
	createNamespace(t, clientFor(t, a.Config()), testNamespace)

	node := newStore(t, clientFor(t, a.Config()), gate, clock.RealClock{})
	_, err := node.PublishRecord(ctx, "node-b", []byte("1.0.0"), ttl)
	require.NoError(t, err)

	direct := clientFor(t, a.Config())
	rcs, h := wrap(direct)
	var (
		blinded, counting atomic.Bool
		mu                sync.Mutex
		counts            = map[string]int{}
		blind             = make(chan struct{}) // closed: the open watches end as a server ends them
		deletedSighted    bool                  // a delete sent before the watch was blind
	)
	watching := make(chan struct{})
	var once sync.Once
	h.set(func(h *hooks) {
		h.watch = func(opts metav1.ListOptions) (watch.Interface, error) {
			if blinded.Load() {
				return watch.NewEmptyWatch(), nil // its result channel is closed
			}
			w, err := direct.CoordinationV1().Leases(testNamespace).Watch(ctx, opts)
			if err == nil {
				mu.Lock()
				w = endsCleanly(w, blind)
				mu.Unlock()
				// The heartbeats' watch opens once the reaper holds
				// its Lease and has listed them.
				if strings.Contains(opts.LabelSelector, kubestore.LabelRole+"="+kubestore.RoleHeartbeat) {
					once.Do(func() { close(watching) })
				}
			}
			return w, err
		}
		h.beforeGet = func(name string) error {
			if counting.Load() {
				mu.Lock()
				counts["get "+name]++
				mu.Unlock()
			}
			return nil
		}
		h.beforeDelete = func(name string) error {
			mu.Lock()
			defer mu.Unlock()
			if !blinded.Load() {
				deletedSighted = true
			}
			if counting.Load() {
				counts["delete "+name]++
			}
			return nil
		}
	})
	reaper := newStore(t, rcs, gate, clock.RealClock{})

	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, rev, err := reaper.ListRecords(rctx)
		if err != nil {
			return
		}
		_ = reaper.WatchRecords(rctx, rev, func([]versiongate.Record, int64) {})
	}()
	defer func() { cancel(); <-done }()

	select {
	case <-watching:
	case <-ctx.Done():
		t.Fatal("the reaper did not watch the heartbeats")
	}
	// The reaper holds its Lease, has listed the record and its
	// heartbeat, and judges them from when it first saw them: blind its
	// watches now, well before their TTL and margin have passed.
	counting.Store(true)
	blinded.Store(true)
	mu.Lock()
	close(blind)
	mu.Unlock()

	// The reaper judges the record dead a TTL and the margin after it
	// first saw it, and deletes the heartbeat and the record.
	deleted := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return counts["delete "+gate+"-node-b"] > 0
	}
	require.Eventually(t, deleted, time.Minute, 50*time.Millisecond, "the reaper deletes the dead record")
	// Then nothing more about them for several TTLs of the real clock: a
	// slower machine sends fewer requests, never more.
	<-time.After(quiet)
	mu.Lock()
	got := maps.Clone(counts)
	sighted := deletedSighted
	mu.Unlock()
	t.Logf("the reaper's requests about node-b while its watch was blind: %v", got)
	require.False(t, sighted, "a delete was sent before the watch was blind: the test did not stage what it says")
	require.Equal(t, 1, got["delete "+gate+".node-b"], "the dead heartbeat is deleted once")
	require.Equal(t, 1, got["delete "+gate+"-node-b"], "the dead record is deleted once")
	require.Zero(t, got["get "+gate+".node-b"], "no heartbeat read: the reaper deleted it itself")

	// Its watches last again, opened from the revision last seen, and
	// show the deletion: the reaper forgets the record.
	mu.Lock()
	blind = make(chan struct{})
	mu.Unlock()
	blinded.Store(false)
	require.Eventually(t, func() bool { return kubestore.Reaped(reaper) == 0 }, time.Minute, 50*time.Millisecond,
		"once its watch shows the deletion, the reaper forgets the record")
}

// endsCleanly relays w's events until blind is closed or the relay is
// stopped, then stops w and closes the relay's channel, as a watch the
// server ends: a watch stopped on the client's side instead ends with an
// error event, which ends WatchRecords.
func endsCleanly(w watch.Interface, blind <-chan struct{}) watch.Interface {
	ch := make(chan watch.Event)
	pw := watch.NewProxyWatcher(ch)
	go func() {
		defer close(ch)
		defer w.Stop()
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				select {
				case ch <- ev:
				case <-pw.StopChan():
					return
				case <-blind:
					return
				}
			case <-pw.StopChan():
				return
			case <-blind:
				return
			}
		}
	}()
	return pw
}
