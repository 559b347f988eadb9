package kubestore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
)

// With K stores on a real apiserver in steady state, each publishing a
// record kept alive every 200ms and watching the records as a gate does,
// the keep-alives reach the reaper alone: every other store's watches
// receive nothing but the reaper Lease's renewals. (Before records and
// liveness were split, every store received every keep-alive: K² events
// per renewal period.)
//
// What it counts is where keep-alives go, not whether they arrive in
// time: the records live an hour, so a loaded machine that delays
// keep-alives by seconds expires none (with 3s records, one did once, and
// its deletion reached every store), and the reaper Lease's renewals are
// bounded by the window's own length, whatever it took.
func TestOnlyTheReaperReceivesKeepAlives(t *testing.T) {
	const k = 5
	ctx := testCtx(t)
	cs := clientFor(t, apiServer(t))
	gate := uniqueGate("quiet")
	stores := make([]*kubestore.Store, k)
	counted := make([]*counts, k)
	var keepAlives atomic.Int64
	kctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	for i := range stores {
		ccs, c := newCountingClient(cs)
		stores[i], counted[i] = newStore(t, ccs, gate, nil), c
		l, err := stores[i].PublishRecord(ctx, fmt.Sprintf("n%d", i), []byte("1.0.0"), time.Hour)
		require.NoError(t, err)
		runWatch(t, stores[i])
		wg.Add(1)
		go func(st *kubestore.Store) {
			defer wg.Done()
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-kctx.Done():
					return
				case <-tick.C:
				}
				if _, err := st.KeepAlive(kctx, l); err == nil {
					keepAlives.Add(1)
				}
			}
		}(stores[i])
	}
	// Steady state: one store holds the reaper Lease and watches the
	// heartbeats.
	reaper := -1
	require.Eventually(t, func() bool {
		l, err := cs.CoordinationV1().Leases(testNamespace).Get(ctx, gate+"-reaper", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for i, st := range stores {
			_, w := counted[i].snapshot()
			if ptr.Deref(l.Spec.HolderIdentity, "") == kubestore.ReaperIdentity(st) && w[testNamespace+" "+heartbeatSelector(gate)] > 0 {
				reaper = i
				return true
			}
		}
		return false
	}, time.Minute, 10*time.Millisecond)
	// The window counts the events of the writes made from now on. The
	// records were created before, but a store's watch may deliver their
	// events only now (a watch opened late replays them from the store's
	// listing): those of Lease versions up to the server's current
	// revision are not counted.
	now, err := cs.CoordinationV1().Leases(testNamespace).List(ctx, metav1.ListOptions{Limit: 1})
	require.NoError(t, err)
	rv, err := strconv.ParseInt(now.ResourceVersion, 10, 64)
	require.NoError(t, err)
	for _, c := range counted {
		c.resetSince(rv)
	}
	before := keepAlives.Load()
	began := time.Now()
	require.Eventually(t, func() bool { return keepAlives.Load()-before >= 20*k }, time.Minute, 10*time.Millisecond, "keep-alives")
	window := time.Since(began)
	received := func(i int) (all, reaperLease int) {
		ev, _ := counted[i].snapshot()
		for _, m := range ev {
			for role, n := range m {
				all += n
				if role == kubestore.RoleReaper {
					reaperLease += n
				}
			}
		}
		return all, reaperLease
	}
	// The reaper Lease's renewals: one per 10s, so at most one more than
	// the window holds (read a little after it ended).
	renewals := int(window/(10*time.Second)) + 2
	rall, _ := received(reaper)
	require.GreaterOrEqual(t, rall, 15*k, "the reaper receives the keep-alives")
	for i := range stores {
		if i == reaper {
			continue
		}
		all, rl := received(i)
		require.Equal(t, rl, all, "store %d received %d events, %d of them not the reaper Lease's", i, all, all-rl)
		require.LessOrEqual(t, all, renewals, "store %d: the reaper Lease's renewals only, in %v", i, window)
		_, w := counted[i].snapshot()
		require.Zero(t, w[testNamespace+" "+heartbeatSelector(gate)], "store %d watches heartbeats", i)
	}
	t.Logf("%d keep-alives; the reaper (store %d) received %d events", keepAlives.Load()-before, reaper, rall)
}

func heartbeatSelector(gate string) string {
	return kubestore.LabelGate + "=" + gate + "," + kubestore.LabelRole + "=" + kubestore.RoleHeartbeat
}

// reaperHolder returns the reaper Lease's holder, "" if none.
func reaperHolder(t *testing.T, cs interface {
	Get(context.Context, string, metav1.GetOptions) (*coordinationv1.Lease, error)
}, gate string) string {
	l, err := cs.Get(context.Background(), gate+"-reaper", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// The reaper's store crashes (it stops, and its release never lands);
// another takes the reaper Lease once it has not changed for its 30s plus
// the margin, and reaps a dead node's record then.
func TestReaperTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newFakeWorld(t)
		cs, leases, clk := w.cs, w.leases, w.clk
		acs, ah := wrap(cs)
		ah.set(func(h *hooks) { h.beforeDelete = func(string) error { return errCut } })
		a := newStore(t, acs, "take", clk)
		b := newStore(t, cs, "take", clk)
		stopA := watchUntilStopped(a)
		synctest.Wait()
		require.Equal(t, kubestore.ReaperIdentity(a), reaperHolder(t, leases, "take"))
		runWatch(t, b)
		advance(clk, 25*time.Second)
		require.Equal(t, kubestore.ReaperIdentity(a), reaperHolder(t, leases, "take"), "a renews it")
		stopA()
		stopped := clk.Now()
		// A node that dies at once.
		node := newStore(t, cs, "take", clk)
		_, err := node.PublishRecord(context.Background(), "n1", []byte("1.0.0"), 10*time.Second)
		require.NoError(t, err)
		took := advanceUntil(t, clk, time.Minute, "b's takeover", func() bool {
			return reaperHolder(t, leases, "take") == kubestore.ReaperIdentity(b)
		})
		// a's last renewal was at most 10s before it stopped, and b saw
		// it then or later.
		require.GreaterOrEqual(t, took, 30*time.Second+3*time.Second-10*time.Second)
		require.LessOrEqual(t, took, 30*time.Second+3*time.Second+2*time.Second)
		advanceUntil(t, clk, time.Minute, "the dead record's reaping", func() bool { return leaseGone(t, leases, "take-n1") })
		t.Logf("the reaper stopped; taken over at +%v, the dead record reaped at +%v", took, clk.Since(stopped))
		require.True(t, leaseGone(t, leases, "take.n1"), "the heartbeat went first")
	})
}

// A reaper whose WatchRecords returns releases the Lease: another store
// takes it at once, not after the 33s a crashed reaper's Lease takes to
// age out, and reaps a dead node's record its TTL plus margin later.
func TestReaperReleasedWhenItsWatchEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newFakeWorld(t)
		cs, leases, clk := w.cs, w.leases, w.clk
		a := newStore(t, cs, "rel", clk)
		stopA := watchUntilStopped(a)
		synctest.Wait()
		require.Equal(t, kubestore.ReaperIdentity(a), reaperHolder(t, leases, "rel"))
		b := newStore(t, cs, "rel", clk)
		runWatch(t, b)
		advance(clk, 25*time.Second)
		node := newStore(t, cs, "rel", clk)
		_, err := node.PublishRecord(context.Background(), "n1", []byte("1.0.0"), 10*time.Second)
		require.NoError(t, err)
		stopA()
		synctest.Wait()
		require.Equal(t, kubestore.ReaperIdentity(b), reaperHolder(t, leases, "rel"), "b holds the Lease at once")
		reaped := advanceUntil(t, clk, time.Minute, "the dead record's reaping", func() bool { return leaseGone(t, leases, "rel-n1") })
		t.Logf("the dead record reaped %v after its only heartbeat", reaped)
		require.Less(t, reaped, 10*time.Second+time.Second+2*time.Second, "within TTL + margin of b's first sight")
	})
}

// leaseGone reports whether the Lease name is gone; any other error fails
// t.
func leaseGone(t testing.TB, leases interface {
	Get(context.Context, string, metav1.GetOptions) (*coordinationv1.Lease, error)
}, name string) bool {
	t.Helper()
	_, err := leases.Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true
	}
	require.NoError(t, err)
	return false
}

// watchUntilStopped runs st's ListRecords and WatchRecords, as a gate
// does, until the function it returns is called, which waits for them.
func watchUntilStopped(st *kubestore.Store) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, rev, err := st.ListRecords(ctx)
		if err == nil {
			_ = st.WatchRecords(ctx, rev, func([]versiongate.Record, int64) {})
		}
	}()
	return func() { cancel(); <-done }
}

// Two stores that both hold the reaper Lease (here: by one identity) both
// reap: each dead record is deleted once, and no live one.
func TestTwoReapersReapOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newFakeWorld(t)
		ctx, cs, clk := w.ctx, w.cs, w.clk
		var mu sync.Mutex
		deleted := map[string]int{}
		reapers := make([]*kubestore.Store, 2)
		for i := range reapers {
			rcs, h := wrap(cs)
			h.set(func(h *hooks) {
				h.afterDelete = func(name string, err error) {
					if err == nil {
						mu.Lock()
						deleted[name]++
						mu.Unlock()
					}
				}
			})
			reapers[i] = newStore(t, rcs, "two", clk)
			kubestore.SetReaperIdentity(reapers[i], "both")
		}
		node := newStore(t, cs, "two", clk)
		var leases []versiongate.RecordLease
		for _, id := range []string{"live1", "live2", "dead1", "dead2"} {
			l, err := node.PublishRecord(ctx, id, []byte("1.0.0"), 10*time.Second)
			require.NoError(t, err)
			leases = append(leases, l)
		}
		for _, r := range reapers {
			runWatch(t, r)
		}
		// A minute in which the first two are kept alive every 3s.
		for range 20 {
			for _, l := range leases[:2] {
				_, err := node.KeepAlive(ctx, l)
				require.NoError(t, err)
			}
			advance(clk, 3*time.Second)
		}
		rs, _, err := node.ListRecords(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"live1", "live2"}, recordIDs(rs))
		mu.Lock()
		require.Equal(t, map[string]int{"two.dead1": 1, "two-dead1": 1, "two.dead2": 1, "two-dead2": 1}, deleted)
		mu.Unlock()
	})
}

// Orphans end both ways: a record whose heartbeat is gone is deleted once
// the reaper has not seen it alive for the record's TTL plus the margin
// (and its node's keep-alive reports ErrRecordLost), a heartbeat no record
// names is deleted once dead, and a publish replaces an orphaned record
// at once.
func TestOrphansEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newFakeWorld(t)
		ctx, cs, leases, clk := w.ctx, w.cs, w.leases, w.clk
		node := newStore(t, cs, "orph", clk)
		l, err := node.PublishRecord(ctx, "n1", []byte("1.0.0"), 10*time.Second)
		require.NoError(t, err)
		require.NoError(t, leases.Delete(ctx, "orph.n1", metav1.DeleteOptions{}))
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "orph.n2", Labels: map[string]string{kubestore.LabelGate: "orph", kubestore.LabelRole: kubestore.RoleHeartbeat}},
			Spec:       coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](10)},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		runWatch(t, newStore(t, cs, "orph", clk))
		advance(clk, 5*time.Second)
		_, err = leases.Get(ctx, "orph-n1", metav1.GetOptions{})
		require.NoError(t, err, "an orphan is deleted only after its TTL plus the margin")
		advance(clk, 10*time.Second)
		for _, name := range []string{"orph-n1", "orph.n2"} {
			_, err = leases.Get(ctx, name, metav1.GetOptions{})
			require.True(t, apierrors.IsNotFound(err), "%s: %v", name, err)
		}
		_, err = node.KeepAlive(ctx, l)
		require.ErrorIs(t, err, versiongate.ErrRecordLost)

		// A record naming a heartbeat that is gone is replaced at once.
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "orph-n3", Labels: map[string]string{kubestore.LabelGate: "orph", kubestore.LabelRole: kubestore.RoleRecord},
				Annotations: map[string]string{kubestore.AnnotationValue: b64("0.9.0"), kubestore.AnnotationHeartbeat: testNamespace + "/orph.n3/gone"}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = node.PublishRecord(ctx, "n3", []byte("1.0.0"), 10*time.Second)
		require.NoError(t, err)
		rec, err := leases.Get(ctx, "orph-n3", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, b64("1.0.0"), rec.Annotations[kubestore.AnnotationValue])
	})
}

// The reaper's loops never spin against a server that answers at once:
// a reaper Lease that is neither readable nor creatable, a renewal
// refused with 409 every time, and a liveness watch that ends at once.
// Counted over a minute of synctest's time.
func TestReaperDoesNotSpin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs, h := wrap(kubefake.NewClientset())
		var gets, creates, updates, liveWatches atomic.Int64
		var refuseUpdates atomic.Bool
		h.set(func(h *hooks) {
			h.beforeGet = func(name string) error {
				if name == "spin-reaper" {
					gets.Add(1)
					if !refuseUpdates.Load() {
						return apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, name)
					}
				}
				return nil
			}
			h.beforeCreate = func(l *coordinationv1.Lease) error {
				if l.Name == "spin-reaper" {
					creates.Add(1)
					if !refuseUpdates.Load() {
						return apierrors.NewAlreadyExists(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, l.Name)
					}
				}
				return nil
			}
			h.beforeUpdate = func(l *coordinationv1.Lease) error {
				if l.Name == "spin-reaper" {
					updates.Add(1)
					if refuseUpdates.Load() && updates.Load() > 1 {
						return apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, l.Name, fmt.Errorf("test"))
					}
				}
				return nil
			}
			h.watch = func(opts metav1.ListOptions) (watch.Interface, error) {
				if strings.Contains(opts.LabelSelector, "="+kubestore.RoleHeartbeat) {
					liveWatches.Add(1)
					return watch.NewEmptyWatch(), nil
				}
				return watch.NewFake(), nil // the record watch: quiet
			}
		})
		st := newStore(t, cs, "spin", nil)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = st.WatchRecords(ctx, 1, func([]versiongate.Record, int64) {})
		// 1s doubling to 10s: 1+2+4+8 = 15s in 4 tries, then one per 10s.
		require.LessOrEqual(t, gets.Load(), int64(4+5+1), "reads of an unreadable reaper Lease in a minute")
		require.LessOrEqual(t, creates.Load(), int64(4+5+1), "creates refused in a minute")
		t.Logf("%d reads, %d creates in a minute", gets.Load(), creates.Load())

		gets.Store(0)
		refuseUpdates.Store(true)
		ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = st.WatchRecords(ctx, 1, func([]versiongate.Record, int64) {})
		require.LessOrEqual(t, updates.Load(), int64(1+4+5+1), "renewals refused in a minute")
		require.LessOrEqual(t, gets.Load(), int64(4+5+1))
		require.Positive(t, liveWatches.Load(), "it held the Lease and watched liveness")
		require.LessOrEqual(t, liveWatches.Load(), int64(18), "liveness watches ending at once, in a minute")
		t.Logf("%d renewals, %d reads, %d liveness watches in a minute", updates.Load(), gets.Load(), liveWatches.Load())
	})
}

// A reaper whose liveness view misses a heartbeat that is being renewed
// (a watch that lags, a listing not caught up) must not take the record
// for an orphan: it reads the heartbeat itself before deleting. Here the
// reaper's liveness listings leave the heartbeat out and its liveness
// watches deliver nothing, while the node renews it every 3s for 40s.
func TestOrphanDeletedOnlyOnceItsHeartbeatIsReadGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newFakeWorld(t)
		ctx, cs, leases, clk := w.ctx, w.cs, w.leases, w.clk
		blind, h := wrap(cs)
		heartbeats := kubestore.LabelRole + "=" + kubestore.RoleHeartbeat
		h.set(func(h *hooks) {
			h.list = func(opts metav1.ListOptions) (*coordinationv1.LeaseList, bool) {
				if !strings.Contains(opts.LabelSelector, heartbeats) {
					return nil, false
				}
				out, err := leases.List(ctx, opts)
				if err != nil {
					return nil, false
				}
				var kept []coordinationv1.Lease
				for _, l := range out.Items {
					if l.Name != "blind.n1" {
						kept = append(kept, l)
					}
				}
				out.Items = kept
				return out, true
			}
			h.watch = func(opts metav1.ListOptions) (watch.Interface, error) {
				if strings.Contains(opts.LabelSelector, heartbeats) {
					return watch.NewFake(), nil
				}
				return leases.Watch(ctx, opts)
			}
		})
		node := newStore(t, cs, "blind", clk)
		l, err := node.PublishRecord(ctx, "n1", []byte("1.0.0"), 10*time.Second)
		require.NoError(t, err)
		runWatch(t, newStore(t, blind, "blind", clk))
		for range 13 {
			advance(clk, 3*time.Second)
			_, err := node.KeepAlive(ctx, l)
			require.NoError(t, err)
		}
		_, err = leases.Get(ctx, "blind-n1", metav1.GetOptions{})
		require.NoError(t, err, "a record whose heartbeat is renewed was deleted as an orphan")
	})
}
