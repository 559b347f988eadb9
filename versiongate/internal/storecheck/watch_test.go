package storecheck_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/internal/storecheck"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

func tooOld(err error) bool { return errors.Is(err, versiongatetest.ErrCompacted) }

// watching is a watch a script started: its deliveries, and its end.
type watching[T any] struct {
	t      *testing.T
	got    chan T
	cancel context.CancelFunc
	done   chan error
	// last is the last delivery await took, if seen.
	last T
	seen bool
}

// watchRecords starts w's records watch from rev.
func watchRecords(t *testing.T, ctx context.Context, w versiongate.Store, rev int64) *watching[int64] {
	return startWatching(t, ctx, func(ctx context.Context, got chan<- int64) error {
		return w.WatchRecords(ctx, rev, func(_ []versiongate.Record, r int64) { got <- r })
	})
}

// watchStatus starts w's status watch from rev.
func watchStatus(t *testing.T, ctx context.Context, w versiongate.Store, rev int64) *watching[versiongate.StoredStatus] {
	return startWatching(t, ctx, func(ctx context.Context, got chan<- versiongate.StoredStatus) error {
		return w.WatchStatus(ctx, rev, func(st versiongate.StoredStatus) bool { got <- st; return false })
	})
}

func startWatching[T any](t *testing.T, ctx context.Context, watch func(context.Context, chan<- T) error) *watching[T] {
	ctx, cancel := context.WithCancel(ctx)
	w := &watching[T]{t: t, got: make(chan T, 100), cancel: cancel, done: make(chan error, 1)}
	t.Cleanup(cancel)
	go func() { w.done <- watch(ctx, w.got) }()
	return w
}

// await waits up to 10s for a delivery that ok accepts, unless the last
// one it took is accepted.
func (w *watching[T]) await(what string, ok func(T) bool) {
	w.t.Helper()
	if w.seen && ok(w.last) {
		return
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case v := <-w.got:
			w.last, w.seen = v, true
			if ok(v) {
				return
			}
		case <-deadline:
			w.t.Fatalf("%s not delivered within 10s", what)
		}
	}
}

// stop ends the watch and requires that it ended for that.
func (w *watching[T]) stop() {
	w.t.Helper()
	w.cancel()
	require.ErrorIs(w.t, <-w.done, context.Canceled)
}

// atOrPast accepts a records batch at or past rev.
func atOrPast(rev int64) func(int64) bool { return func(r int64) bool { return r >= rev } }

// watchRecordsScript lists, watches the records from the listing through
// defect(s), publishes three records one after another, each awaited on
// the watch until a batch at or past its revision arrived (the last
// alone if skips: the defect loses the others), then lists again and
// stops the watch.
func watchRecordsScript(t *testing.T, defect func(versiongate.Store) versiongate.Store, skips bool) []storecheck.Op {
	t.Helper()
	ctx := context.Background()
	s := versiongatetest.NewStore(versiongatetest.StoreConfig{})
	r := storecheck.NewRecorder(nil, storecheck.WatchTooOld(tooOld))
	leader, node := r.Wrap("leader", defect(s)), r.Wrap("node", s)
	// A record before the watch, so that a replay has one to show.
	_, err := node.PublishRecord(ctx, "a", []byte("a"), time.Minute)
	require.NoError(t, err)
	_, rev, err := leader.ListRecords(ctx)
	require.NoError(t, err)
	w := watchRecords(t, ctx, leader, rev)
	for _, id := range []string{"b", "c", "d"} {
		l, err := node.PublishRecord(ctx, id, []byte(id), time.Minute)
		require.NoError(t, err)
		if skips && id != "d" {
			continue
		}
		w.await(fmt.Sprintf("a batch at or past revision %d", l.Revision), atOrPast(l.Revision))
	}
	_, _, err = node.ListRecords(ctx)
	require.NoError(t, err)
	w.stop()
	return r.History()
}

// watchStatusScript writes a status, reads it, watches it from the read
// through defect(s), writes two more statuses, each awaited on the watch,
// and reads it again.
func watchStatusScript(t *testing.T, defect func(versiongate.Store) versiongate.Store, _ bool) []storecheck.Op {
	t.Helper()
	ctx := context.Background()
	s := versiongatetest.NewStore(versiongatetest.StoreConfig{})
	r := storecheck.NewRecorder(nil, storecheck.WatchTooOld(tooOld))
	leader, node := r.Wrap("leader", s), r.Wrap("node", defect(s))
	term := versiongatetest.NewTerm("leader", 1)
	require.NoError(t, leader.Fence(ctx, term))
	require.NoError(t, leader.WriteStatus(ctx, term, status(t, "1.0.0"), 0))
	st, err := node.ReadStatus(ctx)
	require.NoError(t, err)
	w := watchStatus(t, ctx, node, st.Revision)
	for _, v := range []string{"2.0.0", "3.0.0"} {
		want := status(t, v)
		require.NoError(t, leader.WriteStatus(ctx, term, want, 0))
		w.await("status "+v, func(st versiongate.StoredStatus) bool { return string(st.Value) == string(want) })
	}
	_, err = node.ReadStatus(ctx)
	require.NoError(t, err)
	w.stop()
	return r.History()
}

// watchDeletionsScript lists, watches the records from the listing
// through defect(s), publishes a, deletes it, and publishes b and c, each
// publish awaited on the watch until a batch at or past its revision
// arrived, then lists again and stops the watch.
func watchDeletionsScript(t *testing.T, defect func(versiongate.Store) versiongate.Store, _ bool) []storecheck.Op {
	t.Helper()
	ctx := context.Background()
	s := versiongatetest.NewStore(versiongatetest.StoreConfig{})
	r := storecheck.NewRecorder(nil, storecheck.WatchTooOld(tooOld))
	leader, node := r.Wrap("leader", defect(s)), r.Wrap("node", s)
	_, rev, err := leader.ListRecords(ctx)
	require.NoError(t, err)
	w := watchRecords(t, ctx, leader, rev)
	for _, id := range []string{"a", "b", "c"} {
		l, err := node.PublishRecord(ctx, id, []byte(id), time.Minute)
		require.NoError(t, err)
		w.await(fmt.Sprintf("a batch at or past revision %d", l.Revision), atOrPast(l.Revision))
		if id == "a" {
			require.NoError(t, node.DeleteRecord(ctx, l))
		}
	}
	_, _, err = node.ListRecords(ctx)
	require.NoError(t, err)
	w.stop()
	return r.History()
}

func same(s versiongate.Store) versiongate.Store { return s }

// Each watch defect is rejected, and the same script on the correct
// store (the control) accepted: a watch that skips an event, one that
// replays an old event (records and status), one that starts from a
// revision it was not given (ahead: it misses changes; behind: it
// delivers one at or before the revision asked), and one that misses a
// deletion, reports it after a later change, or reports one that did not
// happen. A status watch from a revision ahead is not among them: its
// contract lets it skip intermediate values.
func TestWatchDefectsRejected(t *testing.T) {
	type script = func(*testing.T, func(versiongate.Store) versiongate.Store, bool) []storecheck.Op
	controls := map[string]bool{}
	for _, tc := range []struct {
		name   string
		h      script
		defect func(versiongate.Store) versiongate.Store
		skips  bool
	}{
		{"records watch skips an event", watchRecordsScript, func(s versiongate.Store) versiongate.Store { return storecheck.SkipWatchEvent(s, 2) }, true},
		{"records watch replays an event", watchRecordsScript, storecheck.ReplayWatchEvent, false},
		{"status watch replays an event", watchStatusScript, storecheck.ReplayWatchEvent, false},
		{"records watch from a fabricated revision", watchRecordsScript, func(s versiongate.Store) versiongate.Store { return storecheck.FabricatedWatchStart(s, 2) }, true},
		{"records watch from a fabricated older revision", watchRecordsScript, func(s versiongate.Store) versiongate.Store { return storecheck.FabricatedWatchStart(s, -1) }, false},
		{"records watch misses a deletion", watchDeletionsScript, storecheck.DropWatchDeletions, false},
		{"records watch reports a deletion late", watchDeletionsScript, storecheck.DelayWatchDeletions, false},
		{"records watch reports a deletion that did not happen", watchDeletionsScript, func(s versiongate.Store) versiongate.Store { return storecheck.FabricatedWatchDeletion(s, "b") }, false},
	} {
		// The control: the script (and its way of awaiting) once on the
		// correct store.
		control := fmt.Sprintf("%p %v", tc.h, tc.skips)
		if !controls[control] {
			controls[control] = true
			t.Run("control for "+tc.name, func(t *testing.T) {
				require.Equal(t, porcupine.Ok, verify(t, tc.h(t, same, tc.skips)))
			})
		}
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, porcupine.Illegal, verify(t, tc.h(t, tc.defect, tc.skips)))
		})
	}
}

// The herd defect: after the history moved on (records published since
// the status was written), a read reports the status' own revision, from
// which a watch may no longer be served; the checker rejects it, and
// accepts the same history from the correct store.
func TestStatusOwnRevisionRejected(t *testing.T) {
	for _, tc := range []struct {
		defect func(versiongate.Store) versiongate.Store
		want   porcupine.CheckResult
	}{{same, porcupine.Ok}, {storecheck.StatusOwnRevision, porcupine.Illegal}} {
		ctx := context.Background()
		s := versiongatetest.NewStore(versiongatetest.StoreConfig{})
		r := storecheck.NewRecorder(nil)
		leader, node := r.Wrap("leader", s), r.Wrap("node", tc.defect(s))
		term := versiongatetest.NewTerm("leader", 1)
		require.NoError(t, leader.Fence(ctx, term))
		require.NoError(t, leader.WriteStatus(ctx, term, status(t, "1.0.0"), 0))
		for i := range 3 {
			_, err := leader.PublishRecord(ctx, fmt.Sprint(i), []byte("x"), time.Minute)
			require.NoError(t, err)
		}
		_, err := node.ReadStatus(ctx)
		require.NoError(t, err)
		require.Equal(t, tc.want, verify(t, r.History()))
	}
}

// A watch that ends "too old" is accepted only from a revision the
// history moved on from; on the in-memory store, a compaction.
func TestWatchTooOldOnlyAfterMovingOn(t *testing.T) {
	for _, compact := range []bool{false, true} {
		ctx := context.Background()
		s := versiongatetest.NewStore(versiongatetest.StoreConfig{})
		r := storecheck.NewRecorder(nil, storecheck.WatchTooOld(tooOld))
		node := r.Wrap("node", s)
		_, rev, err := node.ListRecords(ctx)
		require.NoError(t, err)
		_, err = node.PublishRecord(ctx, "a", []byte("a"), time.Minute)
		require.NoError(t, err)
		if compact {
			r.MovedOn("compactor", s.Compact)
		} else {
			// The same store answer without a compaction: a server
			// claiming a revision too old that it could serve.
			node = r.Wrap("node", storecheck.AnswerTooOld(s, fmt.Errorf("%w: always", versiongatetest.ErrCompacted)))
		}
		err = node.WatchRecords(ctx, rev, func([]versiongate.Record, int64) {})
		require.ErrorIs(t, err, versiongatetest.ErrCompacted)
		want := porcupine.Illegal
		if compact {
			want = porcupine.Ok
		}
		require.Equal(t, want, verify(t, r.History()), "compacted %t", compact)
	}
}

// On a store whose history is a window that moves on by itself (the
// apiserver's watch cache), a watch that ends "too old" is accepted only
// from a revision outside the window the store declares it keeps: one
// first reported longer ago than that, or before a restart (MovedOn).
// A server that answers 410 for a revision it still keeps is refused,
// though that revision is below the newest reported (which once sufficed).
func TestWatchTooOldOnlyOutsideTheWindow(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		kept                   time.Duration
		restartBefore, restart bool
		want                   porcupine.CheckResult
	}{
		{"inside the window", time.Hour, false, false, porcupine.Illegal},
		{"outside the window", time.Nanosecond, false, false, porcupine.Ok},
		{"inside the window, but a restart came since", time.Hour, false, true, porcupine.Ok},
		// The history after a restart may start a little after the
		// server serves again, above a revision reported meanwhile.
		{"inside the window, reported just after a restart", time.Hour, true, false, porcupine.Ok},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := versiongatetest.NewStore(versiongatetest.StoreConfig{})
			r := storecheck.NewRecorder(nil, storecheck.WatchTooOld(tooOld), storecheck.WatchWindow(tc.kept))
			node := r.Wrap("node", s)
			if tc.restartBefore {
				r.MovedOn("restart", func() {})
			}
			_, rev, err := node.ListRecords(ctx)
			require.NoError(t, err)
			// A newer revision: rev is below the newest reported.
			_, err = node.PublishRecord(ctx, "a", []byte("a"), time.Minute)
			require.NoError(t, err)
			if tc.restart {
				r.MovedOn("restart", func() {})
			}
			node = r.Wrap("node", storecheck.AnswerTooOld(s, fmt.Errorf("%w: always", versiongatetest.ErrCompacted)))
			err = node.WatchRecords(ctx, rev, func([]versiongate.Record, int64) {})
			require.ErrorIs(t, err, versiongatetest.ErrCompacted)
			require.Equal(t, tc.want, verify(t, r.History()))
		})
	}
}

// The model's watch rules, case by case.
func TestModelWatchCases(t *testing.T) {
	watch := func(from int64) storecheck.Input {
		return storecheck.Input{Kind: storecheck.KindWatch, Watch: 1, From: from}
	}
	batchOf := func(in storecheck.Input, rev int64, changes ...string) storecheck.Op {
		out := storecheck.Output{Outcome: storecheck.OK, Rev: rev}
		for _, c := range changes {
			r := versiongate.Record{ID: c[1:]}
			if c[0] == '+' {
				r.Value = []byte(c[1:])
			}
			out.Records = append(out.Records, r)
		}
		return op(in, out)
	}
	batch := func(from, rev int64, changes ...string) storecheck.Op {
		return batchOf(storecheck.Input{Kind: storecheck.KindRecordsEvent, Watch: 1, From: from}, rev, changes...)
	}
	// lateBatch is a batch of a store whose watches may report a
	// deletion late (LostRecordsLinger).
	lateBatch := func(from, rev int64, changes ...string) storecheck.Op {
		return batchOf(storecheck.Input{Kind: storecheck.KindRecordsEvent, Watch: 1, From: from, Lingers: true}, rev, changes...)
	}
	del := func(id string, lease int64) storecheck.Op {
		return op(storecheck.Input{Kind: storecheck.KindDelete, ID: id, Lease: lease}, ok)
	}
	end := func(from int64, window bool) storecheck.Op {
		return op(storecheck.Input{Kind: storecheck.KindWatchEnd, Watch: 1, From: from, Window: window}, storecheck.Output{Outcome: storecheck.TooOld})
	}
	movedOn := op(storecheck.Input{Kind: storecheck.KindMovedOn}, ok)
	for _, tc := range []struct {
		name string
		h    []storecheck.Op
		want porcupine.CheckResult
	}{
		{"watch from a listed revision", seq(op(listIn, list(5)), op(watch(5), ok)), porcupine.Ok},
		{"watch from a revision never reported", seq(op(listIn, list(5)), op(watch(9), ok)), porcupine.Illegal},
		{"creation after the start", seq(op(listIn, list(5)), op(publish("a"), published(1, 6)), batch(5, 6, "+a")), porcupine.Ok},
		{"creation at or before the start", seq(op(publish("a"), published(1, 5)), op(listIn, list(6, "a")), batch(6, 7, "+a")), porcupine.Illegal},
		{"creation that never happened", seq(op(listIn, list(5)), batch(5, 6, "+a")), porcupine.Illegal},
		{"creation skipped", seq(op(listIn, list(5)), op(publish("a"), published(1, 6)), op(publish("b"), published(2, 7)), batch(5, 7, "+b")), porcupine.Illegal},
		{"batch going back", seq(op(listIn, list(5)), op(publish("a"), published(1, 6)), batch(6, 5)), porcupine.Illegal},
		// An open publish takes effect for a watch's batch that shows it,
		// as for a listing (it did so on etcd, its client's context
		// cancelled after the put was sent).
		{"open publish shown by a batch", seq(op(listIn, list(5)), op(publish("a"), unknown), batch(5, 6, "+a"), op(listIn, list(7, "a"))), porcupine.Ok},
		// Deletions: applied, so a record shown deleted is gone after the
		// batch, and none the model knows of after the position is
		// skipped.
		{"deletion, then a listing without the record", seq(op(publish("a"), published(1, 5)), batch(5, 6, "-a"), op(listIn, list(7))), porcupine.Ok},
		{"deletion that did not happen", seq(op(publish("a"), published(1, 5)), batch(5, 6, "-a"), op(listIn, list(7, "a"))), porcupine.Illegal},
		{"deletion that did not happen, then a keep-alive", seq(op(publish("a"), published(1, 5)), batch(5, 6, "-a"), op(storecheck.Input{Kind: storecheck.KindKeepAlive, ID: "a", Lease: 1}, ok)), porcupine.Illegal},
		{"deletion before the record's creation", seq(op(publish("a"), published(1, 5)), batch(4, 5, "+a"), batch(5, 6, "-a"), op(publish("a"), published(2, 7)), batch(6, 7, "+a"), op(listIn, list(8, "a"))), porcupine.Ok},
		{"deletion of an earlier record reported after the new one", seq(op(listIn, list(4)), op(publish("a"), published(1, 5)), del("a", 1), op(publish("a"), published(2, 7)), batch(4, 7, "+a"), batch(7, 8, "-a"), op(listIn, list(9, "a"))), porcupine.Illegal},
		{"deletion shown", seq(op(publish("a"), published(1, 5)), op(listIn, list(5, "a")), del("a", 1), op(publish("b"), published(2, 7)), batch(5, 7, "-a", "+b")), porcupine.Ok},
		{"deletion skipped", seq(op(publish("a"), published(1, 5)), op(listIn, list(5, "a")), del("a", 1), op(publish("b"), published(2, 7)), batch(5, 7, "+b")), porcupine.Illegal},
		{"deletion skipped, then shown late", seq(op(publish("a"), published(1, 5)), op(listIn, list(5, "a")), del("a", 1), op(publish("b"), published(2, 7)), batch(5, 7, "+b"), batch(7, 8, "-a")), porcupine.Illegal},
		{"deletion skipped, then shown late, on a store that reports deletions late", seq(op(publish("a"), published(1, 5)), op(listIn, list(5, "a")), del("a", 1), op(publish("b"), published(2, 7)), lateBatch(5, 7, "+b"), lateBatch(7, 7, "-a")), porcupine.Ok},
		{"deletion before the watch's position", seq(op(publish("a"), published(1, 5)), del("a", 1), op(listIn, list(6)), op(publish("b"), published(2, 7)), batch(6, 7, "+b")), porcupine.Ok},
		{"expiry a listing proved, skipped", seq(op(listIn, list(4)), op(publish("a"), published(1, 5)), op(listIn, list(7)), op(publish("b"), published(2, 8)), batch(4, 8, "+b")), porcupine.Illegal},
		// On a store whose watches report deletions late, a batch may
		// omit a record's creation and its deletion when listings showed
		// the record and then proved it gone first: the Kubernetes
		// store's tracker, which its listings and its watch share, passes
		// over a lagging watch's events for a record its listings saw and
		// then found gone (an event at a revision not above the last
		// listing's changes nothing). The model does not know which store
		// a listing came from, so rejecting such a batch would reject
		// that correct history.
		{"expiry a listing proved, creation and deletion skipped, on a store that reports deletions late", seq(op(listIn, list(4)), op(publish("a"), published(1, 5)), op(listIn, list(6, "a")), op(listIn, list(7)), op(publish("b"), published(2, 8)), lateBatch(4, 8, "+b")), porcupine.Ok},
		// Still rejected there: a skipped creation of a record the model
		// holds.
		{"creation skipped, on a store that reports deletions late", seq(op(listIn, list(4)), op(publish("a"), published(1, 5)), op(publish("b"), published(2, 6)), lateBatch(4, 6, "+b")), porcupine.Illegal},
		{"expiry a listing proved, shown", seq(op(listIn, list(4)), op(publish("a"), published(1, 5)), op(listIn, list(7)), op(publish("b"), published(2, 8)), batch(4, 8, "+a", "-a", "+b")), porcupine.Ok},
		{"status event of a value never written", seq(op(listIn, list(5)), op(storecheck.Input{Kind: storecheck.KindStatusEvent, Watch: 1, Status: true, From: 5}, read("x", 6))), porcupine.Illegal},
		{"status event at the watch's position", seq(op(fence(1, false), ok), op(write(1, false, "x", 0), ok), op(readIn, read("x", 5)), op(storecheck.Input{Kind: storecheck.KindStatusEvent, Watch: 1, Status: true, From: 5}, read("x", 5))), porcupine.Illegal},
		{"status event after the position", seq(op(fence(1, false), ok), op(readIn, read("", 5)), op(write(1, false, "x", 0), ok), op(storecheck.Input{Kind: storecheck.KindStatusEvent, Watch: 1, Status: true, From: 5}, read("x", 6))), porcupine.Ok},
		{"too old without moving on", seq(op(listIn, list(5)), end(5, false)), porcupine.Illegal},
		{"too old after moving on", seq(op(listIn, list(5)), movedOn, end(5, false)), porcupine.Ok},
		{"too old from a newer revision than moved on from", seq(op(listIn, list(5)), movedOn, op(listIn, list(6)), end(6, false)), porcupine.Illegal},
		{"too old outside the window the store keeps", seq(op(listIn, list(5)), end(5, true)), porcupine.Ok},
		{"too old inside the window the store keeps, below the newest", seq(op(listIn, list(5)), op(listIn, list(6)), end(5, false)), porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, verify(t, tc.h))
		})
	}
}
