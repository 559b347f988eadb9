package versiongatetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/internal/leadership"
	"github.com/reconkit/reconkit/versiongate"
)

// StoreHarness is what RunStoreConformance needs of an implementation.
type StoreHarness struct {
	// New returns a fresh, empty store for one case, as a function that
	// returns a new connection to it: each connection is one node's view
	// of the same store.
	New func(t *testing.T) (connect func() versiongate.Store)
	// Advance lets d pass for the store's leases (a fake clock's Step).
	// Nil means the store runs on real time: the suite then waits, on a
	// generous deadline, for what time would do.
	Advance func(d time.Duration)
}

// Term is a term that no election backs: a context, a token and an
// identity. The conformance suite fences with it; tests can use it for a
// deposed leader whose token they choose. Resign ends its context.
type Term struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	token  uint64
	id     string
}

var _ versiongate.Term = (*Term)(nil)

// NewTerm returns a live Term with the given token.
func NewTerm(identity string, token uint64) *Term {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Term{ctx: ctx, cancel: cancel, token: token, id: identity}
}

// Context implements versiongate.Term.
func (t *Term) Context() context.Context { return t.ctx }

// Token implements versiongate.Term.
func (t *Term) Token() uint64 { return t.token }

// Identity implements versiongate.Term.
func (t *Term) Identity() string { return t.id }

// Resign implements versiongate.Term: it ends the context.
func (t *Term) Resign(context.Context) error {
	t.cancel(errors.New("resigned"))
	return nil
}

// Lose ends the term as lost (cause leadership lost).
func (t *Term) Lose() { t.cancel(leadership.ErrLost) }

// RunStoreConformance checks that a versiongate.Store keeps the contract
// the gate relies on: create-if-absent records bound to leases that expire
// unless kept alive; listings and watches that miss no change; status
// writes fenced by the term at the moment they are applied, and
// conditioned on the node records. The etcd store passes it on a real etcd
// and the in-memory Store on a fake clock.
func RunStoreConformance(t *testing.T, h StoreHarness) {
	const wait = 30 * time.Second
	ctx := func(t *testing.T) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		return ctx
	}
	value := func(s string) []byte { return []byte(s) }
	records := func(t *testing.T, st versiongate.Store) map[string]string {
		t.Helper()
		rs, _, err := st.ListRecords(ctx(t))
		require.NoError(t, err)
		out := map[string]string{}
		for _, r := range rs {
			out[r.ID] = string(r.Value)
		}
		return out
	}

	t.Run("RecordCreatedOnlyIfAbsent", func(t *testing.T) {
		connect := h.New(t)
		a, b := connect(), connect()
		c := ctx(t)
		la, err := a.PublishRecord(c, "n1", value("a"), 10*time.Second)
		require.NoError(t, err)
		require.Equal(t, "n1", la.ID)
		require.GreaterOrEqual(t, la.TTL, 10*time.Second)
		require.Positive(t, la.Revision)
		_, err = b.PublishRecord(c, "n1", value("b"), 10*time.Second)
		require.ErrorIs(t, err, versiongate.ErrRecordHeld)
		require.Equal(t, map[string]string{"n1": "a"}, records(t, b), "a second publisher took the record")
		// The first holder's lease still holds it.
		ttl, err := a.KeepAlive(c, la)
		require.NoError(t, err)
		require.Positive(t, ttl)
	})

	t.Run("DeleteRecordEndsItAndKeepAliveReportsLoss", func(t *testing.T) {
		connect := h.New(t)
		a := connect()
		c := ctx(t)
		l, err := a.PublishRecord(c, "n1", value("a"), 10*time.Second)
		require.NoError(t, err)
		require.NoError(t, a.DeleteRecord(c, l))
		require.Empty(t, records(t, a))
		_, err = a.KeepAlive(c, l)
		require.ErrorIs(t, err, versiongate.ErrRecordLost)
		require.NoError(t, a.DeleteRecord(c, l), "deleting a record already gone is no error")
		// Free again for anybody.
		_, err = connect().PublishRecord(c, "n1", value("b"), 10*time.Second)
		require.NoError(t, err)
	})

	t.Run("RecordExpiresWithoutKeepAlive", func(t *testing.T) {
		connect := h.New(t)
		a := connect()
		c := ctx(t)
		kept, err := a.PublishRecord(c, "kept", value("k"), 2*time.Second)
		require.NoError(t, err)
		l, err := a.PublishRecord(c, "n1", value("a"), time.Second)
		require.NoError(t, err)
		deadline := time.Now().Add(wait)
		for {
			// Keep one record alive while the other expires.
			_, err := a.KeepAlive(c, kept)
			require.NoError(t, err, "a kept-alive record expired")
			if _, ok := records(t, a)["n1"]; !ok {
				break
			}
			require.True(t, time.Now().Before(deadline), "the record did not expire within %v", wait)
			if h.Advance != nil {
				h.Advance(time.Second)
			} else {
				<-time.After(100 * time.Millisecond)
			}
		}
		_, err = a.KeepAlive(c, l)
		require.ErrorIs(t, err, versiongate.ErrRecordLost)
		require.Contains(t, records(t, a), "kept")
	})

	t.Run("ListThenWatchMissesNothing", func(t *testing.T) {
		connect := h.New(t)
		a, w := connect(), connect()
		c := ctx(t)
		l1, err := a.PublishRecord(c, "n1", value("1"), 10*time.Second)
		require.NoError(t, err)
		rs, rev, err := w.ListRecords(c)
		require.NoError(t, err)
		require.Equal(t, []versiongate.Record{{ID: "n1", Value: value("1")}}, rs)
		require.GreaterOrEqual(t, rev, l1.Revision)

		l2, err := a.PublishRecord(c, "n2", value("2"), 10*time.Second)
		require.NoError(t, err)
		require.Greater(t, l2.Revision, rev)
		require.NoError(t, a.DeleteRecord(c, l1))

		wctx, cancel := context.WithCancel(c)
		defer cancel()
		var got []versiongate.Record
		last := rev
		err = w.WatchRecords(wctx, rev, func(changes []versiongate.Record, r int64) {
			require.Greater(t, r, last, "revisions increase")
			last = r
			for _, ch := range changes {
				got = append(got, versiongate.Record{ID: ch.ID, Value: append([]byte(nil), ch.Value...)})
			}
			if len(got) >= 2 {
				cancel()
			}
		})
		require.ErrorIs(t, err, context.Canceled)
		require.Len(t, got, 2)
		require.Equal(t, "n2", got[0].ID)
		require.Equal(t, value("2"), got[0].Value)
		require.Equal(t, "n1", got[1].ID)
		require.Empty(t, got[1].Value, "a deletion has no value")
	})

	t.Run("OwnRecordAndNoKeepAliveInWatch", func(t *testing.T) {
		// A connection reports its own record like any other, and a
		// keep-alive is no change: the next change after it is the next
		// record.
		st := h.New(t)()
		c := ctx(t)
		_, rev, err := st.ListRecords(c)
		require.NoError(t, err)
		l1, err := st.PublishRecord(c, "n1", value("1"), 10*time.Second)
		require.NoError(t, err)
		_, err = st.KeepAlive(c, l1)
		require.NoError(t, err)
		_, err = st.PublishRecord(c, "n2", value("2"), 10*time.Second)
		require.NoError(t, err)
		wctx, cancel := context.WithCancel(c)
		defer cancel()
		var got []string
		err = st.WatchRecords(wctx, rev, func(changes []versiongate.Record, _ int64) {
			for _, ch := range changes {
				got = append(got, ch.ID+"="+string(ch.Value))
			}
			if len(got) >= 2 {
				cancel()
			}
		})
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, []string{"n1=1", "n2=2"}, got)
	})

	t.Run("StatusReadAndWatch", func(t *testing.T) {
		connect := h.New(t)
		a, w := connect(), connect()
		c := ctx(t)
		st, err := w.ReadStatus(c)
		require.NoError(t, err)
		require.Nil(t, st.Value, "no status yet")
		term := NewTerm("a", 5)
		require.NoError(t, a.Fence(c, term))
		done := make(chan error, 1)
		var seen []byte
		go func() {
			done <- w.WatchStatus(c, st.Revision, func(s versiongate.StoredStatus) bool {
				seen = s.Value
				return string(s.Value) == "v2"
			})
		}()
		require.NoError(t, a.WriteStatus(c, term, value("v1"), 0))
		require.NoError(t, a.WriteStatus(c, term, value("v2"), 0))
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(wait):
			t.Fatal("the status watch did not deliver the newest value")
		}
		require.Equal(t, "v2", string(seen))
		st, err = w.ReadStatus(c)
		require.NoError(t, err)
		require.Equal(t, "v2", string(st.Value))
	})

	t.Run("ListingAtPositiveRevision", func(t *testing.T) {
		// A write conditioned on a listing's revision must never be
		// taken for an unconditioned one (nodesRev 0), even on a store
		// that has seen no change yet.
		st := h.New(t)()
		_, rev, err := st.ListRecords(ctx(t))
		require.NoError(t, err)
		require.Positive(t, rev)
	})

	t.Run("FencedByToken", func(t *testing.T) {
		connect := h.New(t)
		old, cur := connect(), connect()
		c := ctx(t)
		t1, t2 := NewTerm("old", 7), NewTerm("cur", 9)
		require.ErrorIs(t, old.WriteStatus(c, t1, value("unfenced"), 0), versiongate.ErrLeadershipLost,
			"a term that did not fence must not write")
		require.NoError(t, old.Fence(c, t1))
		require.NoError(t, old.WriteStatus(c, t1, value("by 7"), 0))
		require.NoError(t, cur.Fence(c, t2))
		// The deposed term's context is still live: only the store's
		// fence, at apply time, stops it.
		require.ErrorIs(t, old.WriteStatus(c, t1, value("late by 7"), 0), versiongate.ErrLeadershipLost)
		err := old.Fence(c, t1)
		require.ErrorIs(t, err, versiongate.ErrLeadershipLost)
		// The refusal names the fence, both tokens and how to clear it,
		// for the gate's FencedOff warning.
		var fe *versiongate.FencedOffError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, uint64(9), fe.Stored)
		require.Equal(t, uint64(7), fe.Token)
		require.NotEmpty(t, fe.Fence)
		require.NotEmpty(t, fe.Clear)
		require.NoError(t, cur.WriteStatus(c, t2, value("by 9"), 0))
		st, err := cur.ReadStatus(c)
		require.NoError(t, err)
		require.Equal(t, "by 9", string(st.Value))
		// Fencing again with the same token is harmless.
		require.NoError(t, cur.Fence(c, t2))
		require.NoError(t, cur.WriteStatus(c, t2, value("again by 9"), 0))
	})

	t.Run("ConcurrentFencesOneWinner", func(t *testing.T) {
		connect := h.New(t)
		c := ctx(t)
		const n = 8
		var wg sync.WaitGroup
		terms := make([]*Term, n)
		conns := make([]versiongate.Store, n)
		for i := range terms {
			terms[i] = NewTerm(fmt.Sprint(i), uint64(10+i))
			conns[i] = connect()
		}
		for i := range terms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = conns[i].Fence(c, terms[i])
			}()
		}
		wg.Wait()
		ok := 0
		for i := range terms {
			if conns[i].WriteStatus(c, terms[i], value(fmt.Sprint(i)), 0) == nil {
				ok++
				require.Equal(t, n-1, i, "only the highest token may write")
			}
		}
		require.Equal(t, 1, ok)
	})

	t.Run("WriteConditionedOnNodes", func(t *testing.T) {
		connect := h.New(t)
		a, leader := connect(), connect()
		c := ctx(t)
		term := NewTerm("l", 3)
		require.NoError(t, leader.Fence(c, term))
		l, err := a.PublishRecord(c, "n1", value("1"), 10*time.Second)
		require.NoError(t, err)
		_, rev, err := leader.ListRecords(c)
		require.NoError(t, err)
		require.NoError(t, leader.WriteStatus(c, term, value("restricted"), rev))

		// A node joins after the listing: the write conditioned on it is
		// refused and leaves the status alone.
		_, err = a.PublishRecord(c, "late", value("2"), 10*time.Second)
		require.NoError(t, err)
		require.ErrorIs(t, leader.WriteStatus(c, term, value("stale"), rev), versiongate.ErrNodesChanged)
		st, err := leader.ReadStatus(c)
		require.NoError(t, err)
		require.Equal(t, "restricted", string(st.Value))

		// A deletion only removes nodes: like etcd's range comparison, it
		// does not refuse the write.
		_, rev, err = leader.ListRecords(c)
		require.NoError(t, err)
		require.NoError(t, a.DeleteRecord(c, l))
		require.NoError(t, leader.WriteStatus(c, term, value("after delete"), rev))

		// The term's fence is checked first.
		require.NoError(t, connect().Fence(c, NewTerm("next", 4)))
		require.ErrorIs(t, leader.WriteStatus(c, term, value("deposed"), rev), versiongate.ErrLeadershipLost)
	})
}
