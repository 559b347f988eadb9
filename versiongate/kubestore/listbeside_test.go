package kubestore_test

import (
	"context"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
)

// A ListRecords beside a WatchRecords on one Store (its methods are safe
// for concurrent use) must not change what the watch reports: every change
// after the watch's start reaches its callback once, in revision order,
// however far the store's listings have run ahead of the watch. Here the
// watch is held back while records are created, changed, edited with no
// change of value, and deleted, and the watching store lists them all
// before its watch delivers them.
func TestWatchReportsChangesAListingBesideItSaw(t *testing.T) {
	x := startBehindValve(t, "listbeside")
	ctx := x.ctx
	for _, id := range []string{"d", "n"} {
		_, err := x.node.PublishRecord(ctx, id, []byte(id), 40*time.Second)
		require.NoError(t, err)
	}
	x.watch(t)

	x.valve.shut()
	_, err := x.node.PublishRecord(ctx, "c", []byte("c"), 40*time.Second)
	require.NoError(t, err)
	x.annotate(t, "n", "example.com/note", "no change for the gate")
	x.annotate(t, "a", kubestore.AnnotationValue, base64.StdEncoding.EncodeToString([]byte("a2")))
	// d's heartbeat goes first: its record's deletion is proof of death,
	// reported at once (no hold).
	require.NoError(t, x.leases.Delete(ctx, x.gate+".d", metav1.DeleteOptions{}))
	require.NoError(t, x.leases.Delete(ctx, x.gate+"-d", metav1.DeleteOptions{}))
	recs, _, err := x.watcher.ListRecords(ctx)
	require.NoError(t, err)
	require.Equal(t, []versiongate.Record{{ID: "a", Value: []byte("a2")}, {ID: "c", Value: []byte("c")}, {ID: "n", Value: []byte("n")}}, recs, "the listing beside the watch")

	x.valve.open()
	x.waitBatches(t, 3, "every change reported once the watch delivers it")
	// An edit that changes no value, of a record this watch showed, is
	// no change either; z's creation ends what the test waits for.
	x.annotate(t, "c", "example.com/note", "no change for the gate")
	_, err = x.node.PublishRecord(ctx, "z", []byte("z"), 40*time.Second)
	require.NoError(t, err)
	var got []batch
	require.Eventually(t, func() bool {
		got = x.waitBatches(t, 1, "")
		return slices.Contains(got[len(got)-1].ids, "z")
	}, time.Minute, 10*time.Millisecond, "z's creation reported")
	var ids []string
	for i, b := range got {
		ids = append(ids, b.ids...)
		if i > 0 {
			require.Greater(t, b.rev, got[i-1].rev, "revision order: %v", got)
		}
	}
	require.Equal(t, []string{"c", "a", "d", "z"}, ids, "c created, a changed, d deleted, z created, and nothing else: %v", got)
}

// annotate sets annotation k of id's record Lease to v, as an operator's
// edit does.
func (x *behindValve) annotate(t *testing.T, id, k, v string) {
	t.Helper()
	l, err := x.leases.Get(x.ctx, x.gate+"-"+id, metav1.GetOptions{})
	require.NoError(t, err)
	l.Annotations[k] = v
	_, err = x.leases.Update(x.ctx, l, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// A held deletion, once proven, is reported in revision order: at the
// position of the watch that reports it, never ahead of a change the watch
// has still to deliver. Here the store's own listing, beside its watch,
// has seen a record created that the watch (held back, as a slow watch
// is) has not delivered yet; the held deletion proven meanwhile must not
// claim the changes complete up to that creation.
func TestHeldDeathReportedAtTheWatchPosition(t *testing.T) {
	x := startBehindValve(t, "heldorder")
	ctx := x.ctx
	x.watch(t)

	// An operator deletes a's record while its heartbeat stands: held.
	require.NoError(t, x.leases.Delete(ctx, x.gate+"-a", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, deleted, _ := kubestore.Seen(x.watcher, "a")
		return deleted
	}, time.Minute, 10*time.Millisecond, "the watcher sees a's record deleted")

	// The watch falls behind: b's record is created, and the watcher's
	// own listing sees it; its watch has not delivered it.
	x.valve.shut()
	_, err := x.node.PublishRecord(ctx, "b", []byte("b"), 40*time.Second)
	require.NoError(t, err)
	lb, err := x.leases.Get(ctx, x.gate+"-b", metav1.GetOptions{})
	require.NoError(t, err)
	bRev, err := strconv.ParseInt(lb.ResourceVersion, 10, 64)
	require.NoError(t, err)
	recs, _, err := x.watcher.ListRecords(ctx)
	require.NoError(t, err)
	require.Len(t, recs, 2, "a (held) and b listed")

	// a's heartbeat goes; at the next read of it the deletion is proven
	// and reported, while b's creation is still held back.
	require.NoError(t, x.leases.Delete(ctx, x.gate+".a", metav1.DeleteOptions{}))
	x.clk.Step(14 * time.Second)
	x.waitBatches(t, 1, "a's deletion reported once its heartbeat is gone")
	x.valve.open()
	got := x.waitBatches(t, 2, "b's creation reported once the watch delivers it")
	require.Len(t, got, 2)
	require.Equal(t, []string{"a"}, got[0].ids)
	require.Equal(t, []string{"b"}, got[1].ids)
	require.Less(t, got[0].rev, bRev, "a's deletion reported as complete up to %d, before b's creation at %d was", got[0].rev, bRev)
	require.Equal(t, bRev, got[1].rev)
}

// A value the watch delivers after a listing beside it saw the record
// changed back (a to a2, and back to a: a roll-back, an operator's undo)
// is a change for validation too: a status conditioned on the revision
// where the watch showed a2 must be refused, since a is no longer a2. The
// listing alone sees the same value as before and cannot tell.
func TestValidationSeesAChangeBackAListingHid(t *testing.T) {
	x := startBehindValve(t, "aba")
	ctx := x.ctx
	x.watch(t)
	x.valve.shut()
	x.annotate(t, "a", kubestore.AnnotationValue, base64.StdEncoding.EncodeToString([]byte("a2")))
	l, err := x.leases.Get(ctx, x.gate+"-a", metav1.GetOptions{})
	require.NoError(t, err)
	r1, err := strconv.ParseInt(l.ResourceVersion, 10, 64)
	require.NoError(t, err)
	x.annotate(t, "a", kubestore.AnnotationValue, base64.StdEncoding.EncodeToString([]byte("a")))
	_, _, err = x.watcher.ListRecords(ctx)
	require.NoError(t, err)
	x.valve.open()
	got := x.waitBatches(t, 2, "a2, then a again, reported")
	require.Equal(t, r1, got[0].rev)
	why, err := kubestore.Validate(ctx, x.watcher, r1)
	require.NoError(t, err)
	require.NotEmpty(t, why, "a status conditioned on %d, where a was a2, validated while a is a again", r1)
	why, err = kubestore.Validate(ctx, x.watcher, got[1].rev)
	require.NoError(t, err)
	require.Empty(t, why, "a status conditioned on the revision where a is a again")
}

// A listing answered before a record's deletion, whose answer comes after
// the watch saw the deletion and held it (the heartbeat stands), shows an
// older version of the record, not a new one: the hold stays, and once
// the heartbeat is gone the deletion is reported. Taking that listing for
// a publish again would drop the hold, and the watch would never report
// the deletion.
func TestHeldDeathSurvivesAnOlderListing(t *testing.T) {
	x := startBehindValve(t, "heldlist")
	ctx := x.ctx
	x.watch(t)

	// Only the record listing below is held: the reaper's listings of the
	// heartbeats, which the watcher's store may start meanwhile, pass.
	listed, release := make(chan struct{}), make(chan struct{})
	var holding atomic.Bool
	x.hooks.set(func(h *hooks) {
		h.list = func(opts metav1.ListOptions) (*coordinationv1.LeaseList, bool) {
			if !strings.Contains(opts.LabelSelector, kubestore.LabelRole+"="+kubestore.RoleRecord) || !holding.CompareAndSwap(false, true) {
				return nil, false
			}
			out, err := x.leases.List(ctx, opts)
			if err != nil {
				return nil, false
			}
			close(listed)
			<-release
			return out, true
		}
	})
	type result struct {
		recs []versiongate.Record
		err  error
	}
	res := make(chan result, 1)
	go func() {
		recs, _, err := x.watcher.ListRecords(ctx)
		res <- result{recs, err}
	}()
	<-listed
	x.hooks.set(func(h *hooks) { h.list = nil })

	require.NoError(t, x.leases.Delete(ctx, x.gate+"-a", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, deleted, _ := kubestore.Seen(x.watcher, "a")
		return deleted
	}, time.Minute, 10*time.Millisecond, "the watcher sees a's record deleted")
	close(release)
	r := <-res
	require.NoError(t, r.err)
	require.Equal(t, []versiongate.Record{{ID: "a", Value: []byte("a")}}, r.recs, "the listing answered before the deletion")

	require.NoError(t, x.leases.Delete(ctx, x.gate+".a", metav1.DeleteOptions{}))
	x.clk.Step(14 * time.Second)
	got := x.waitBatches(t, 1, "a's deletion reported once its heartbeat is gone")
	require.Equal(t, []string{"a"}, got[0].ids)
	recs, _, err := x.watcher.ListRecords(ctx)
	require.NoError(t, err)
	require.Empty(t, recs)
}

// behindValve is a record "a" published by one store (node) on kubefake,
// and another store (watcher) of the gate whose watches pass through a
// valve the test shuts, to hold them behind the server.
type behindValve struct {
	ctx           context.Context
	gate          string
	leases        coordclient.LeaseInterface
	clk           *clocktesting.FakeClock
	node, watcher *kubestore.Store
	valve         *valve
	hooks         *hooks // of the watcher's client
	mu            sync.Mutex
	batches       []batch
}

type batch struct {
	ids []string
	rev int64
}

func startBehindValve(t *testing.T, gate string) *behindValve {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cs := kubefake.NewClientset()
	x := &behindValve{ctx: ctx, gate: gate, leases: cs.CoordinationV1().Leases(testNamespace),
		clk: clocktesting.NewFakeClock(time.Now()), valve: newValve()}
	x.node = newStore(t, cs, gate, x.clk)
	hc, h := wrap(cs)
	x.hooks = h
	h.set(func(h *hooks) {
		h.watch = func(opts metav1.ListOptions) (watch.Interface, error) {
			w, err := x.leases.Watch(ctx, opts)
			if err != nil {
				return nil, err
			}
			return x.valve.wrap(w), nil
		}
	})
	x.watcher = newStore(t, hc, gate, x.clk)
	_, err := x.node.PublishRecord(ctx, "a", []byte("a"), 40*time.Second)
	require.NoError(t, err)
	return x
}

// watch lists the records with the watcher and watches them from that
// listing's revision until the test ends, keeping every batch.
func (x *behindValve) watch(t *testing.T) {
	_, rev, err := x.watcher.ListRecords(x.ctx)
	require.NoError(t, err)
	wctx, stop := context.WithCancel(x.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = x.watcher.WatchRecords(wctx, rev, func(chs []versiongate.Record, rev int64) {
			b := batch{rev: rev}
			x.mu.Lock()
			defer x.mu.Unlock()
			for _, ch := range chs {
				b.ids = append(b.ids, ch.ID)
			}
			x.batches = append(x.batches, b)
		})
	}()
	t.Cleanup(func() { stop(); x.valve.open(); <-done })
}

// waitBatches waits until at least n batches were reported, and returns
// them.
func (x *behindValve) waitBatches(t *testing.T, n int, what string) []batch {
	t.Helper()
	var got []batch
	require.Eventually(t, func() bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		got = append([]batch(nil), x.batches...)
		return len(got) >= n
	}, time.Minute, 10*time.Millisecond, what)
	return got
}

// valve holds back the events of the watches it wraps while it is shut,
// as a watch far behind the server delivers them late; it starts open.
type valve struct {
	mu   sync.Mutex
	gate chan struct{} // closed while open
}

func newValve() *valve {
	g := make(chan struct{})
	close(g)
	return &valve{gate: g}
}

func (v *valve) shut() {
	v.mu.Lock()
	defer v.mu.Unlock()
	select {
	case <-v.gate:
		v.gate = make(chan struct{})
	default:
	}
}

func (v *valve) open() {
	v.mu.Lock()
	defer v.mu.Unlock()
	select {
	case <-v.gate:
	default:
		close(v.gate)
	}
}

func (v *valve) current() chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.gate
}

// wrap returns a watch that hands over w's events in order, each once the
// valve is open. Stopping it stops w and its forwarder.
func (v *valve) wrap(w watch.Interface) watch.Interface {
	out := make(chan watch.Event)
	stopped := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(out)
		for ev := range w.ResultChan() {
			select {
			case <-v.current():
			case <-stopped:
				return
			}
			select {
			case out <- ev:
			case <-stopped:
				return
			}
		}
	}()
	return &valveWatch{stop: func() { once.Do(func() { close(stopped); w.Stop() }) }, out: out}
}

type valveWatch struct {
	stop func()
	out  chan watch.Event
}

func (w *valveWatch) Stop()                          { w.stop() }
func (w *valveWatch) ResultChan() <-chan watch.Event { return w.out }
