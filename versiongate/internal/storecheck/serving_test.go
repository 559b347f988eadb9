package storecheck

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

func encoded(t *testing.T, st versiongate.Status) string {
	t.Helper()
	b, err := st.Encode()
	require.NoError(t, err)
	return string(b)
}

// The statuses of the rolling upgrade the cases below need.
func rollingStatuses(t *testing.T) (done10, restricted, lowered string) {
	v := func(r versiongate.Release) versiongate.Version { return versiongate.Version{Release: r} }
	done10 = encoded(t, versiongate.Status{State: versiongate.StateDone, Version: v(rel(1, 0)), MinimumCompatibleRelease: rel(1, 0)})
	// A 2.0.0 leader's restricted status over done10.
	restricted = encoded(t, versiongate.Restricted(
		versiongate.Status{State: versiongate.StateDone, Version: v(rel(1, 0)), MinimumCompatibleRelease: rel(1, 0)},
		versiongate.Status{State: versiongate.StateDone, Version: v(rel(2, 0)), MinimumCompatibleRelease: rel(1, 1)}))
	// What a 1.1.0 leader writes over restricted once the 2.0.0 one is
	// gone: every node restricted admits is compatible with 1.1.0's
	// state, so it marks it working, reconciles and writes its own.
	lowered = encoded(t, versiongate.Status{State: versiongate.StateDone, Version: v(rel(1, 1)), MinimumCompatibleRelease: rel(1, 0)})
	return done10, restricted, lowered
}

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

func read(t *testing.T, value string, call, ret float64) statusRead {
	t.Helper()
	r := statusRead{call: ms(call), ret: ms(ret), value: value, rev: 1}
	if value != "" {
		st, err := versiongate.DecodeStatus([]byte(value))
		require.NoError(t, err)
		r.ok, r.status = true, st
	}
	return r
}

func write(client int, value string, nodesRev int64, outcome Outcome, call, ret float64) Op {
	r := ms(ret)
	if outcome == Unknown {
		r = Open
	}
	return Op{Client: client, Name: "leader", Input: Input{Kind: KindWrite, Value: value, Token: 7, NodesRev: nodesRev, Tentative: true},
		Output: Output{Outcome: outcome}, Call: ms(call), Return: r}
}

// A node of release 1.0.0 seen ready between two reads of a status whose
// minimum is 1.1.0 is a violation only if that status stood, validated,
// while it was asked; the reads alone cannot tell, and each case below is
// one the rolling driver met (or can meet) where they mislead.
func TestJudgeSighting(t *testing.T) {
	done10, restricted, lowered := rollingStatuses(t)
	s := func(first, second statusRead, asked, answered float64) sighting {
		return sighting{node: "node-4#2", release: rel(1, 0), first: first, second: second, asked: ms(asked), answered: ms(answered)}
	}
	for _, tc := range []struct {
		name string
		h    []Op
		s    sighting
		want verdict
	}{{
		name: "validated restricted status stood: a violation",
		h:    []Op{write(1, done10, 0, OK, 1, 2), write(2, restricted, 9, OK, 10, 20)},
		s:    s(read(t, restricted, 30, 31), read(t, restricted, 34, 35), 32, 33),
		want: served,
	}, {
		// On the Kubernetes store: the leader's listing missed node-4's
		// new record, its restricted write was applied, seen, and then
		// put back when the validating listing showed the record; node-4
		// passed WaitReady on done10 before it and serves throughout.
		name: "restricted write refused for changed nodes, seen before it was put back",
		h:    []Op{write(1, done10, 0, OK, 1, 2), write(2, restricted, 9, NodesChanged, 10, 40)},
		s:    s(read(t, restricted, 30, 31), read(t, restricted, 34, 35), 32, 33),
		want: refusedWrite,
	}, {
		name: "restricted write of unknown outcome",
		h:    []Op{write(1, done10, 0, OK, 1, 2), write(2, restricted, 9, Unknown, 10, 0)},
		s:    s(read(t, restricted, 30, 31), read(t, restricted, 34, 35), 32, 33),
		want: refusedWrite,
	}, {
		name: "restricted write still being validated",
		h:    []Op{write(1, done10, 0, OK, 1, 2), write(2, restricted, 9, OK, 10, 40)},
		s:    s(read(t, restricted, 30, 31), read(t, restricted, 34, 35), 32, 33),
		want: unreturnedWrite,
	}, {
		// The check read restricted, then a 1.1.0 leader lowered the
		// minimum and node-4 passed WaitReady on that before it was
		// asked (or a watch delivered restricted late).
		name: "status lowered between the read and the question",
		h:    []Op{write(1, done10, 0, OK, 1, 2), write(2, restricted, 9, OK, 10, 20), write(3, lowered, 0, OK, 31, 32)},
		s:    s(read(t, restricted, 29, 30), read(t, lowered, 34, 35), 33, 34),
		want: changed,
	}, {
		name: "status lowered and restricted again between the reads",
		h: []Op{write(1, done10, 0, OK, 1, 2), write(2, restricted, 9, OK, 10, 20), write(3, lowered, 0, OK, 31, 32),
			write(2, restricted, 9, OK, 33, 33.5)},
		s:    s(read(t, restricted, 29, 30), read(t, restricted, 34, 35), 32.5, 32.8),
		want: changed,
	}, {
		name: "a write of unknown outcome may land between the reads",
		h:    []Op{write(1, done10, 0, OK, 1, 2), write(2, restricted, 9, OK, 10, 20), write(3, lowered, 0, Unknown, 25, 0)},
		s:    s(read(t, restricted, 29, 30), read(t, restricted, 34, 35), 32, 33),
		want: changed,
	}, {
		name: "a write the fence refused changes nothing",
		h: []Op{write(1, done10, 0, OK, 1, 2), write(2, restricted, 9, OK, 10, 20),
			{Client: 3, Input: Input{Kind: KindWrite, Value: lowered, Tentative: true}, Output: Output{Outcome: Lost}, Call: ms(31), Return: ms(32)}},
		s:    s(read(t, restricted, 29, 30), read(t, restricted, 34, 35), 32, 33),
		want: served,
	}, {
		name: "a failed read judges nothing",
		h:    []Op{write(1, done10, 0, OK, 1, 2), write(2, restricted, 9, OK, 10, 20)},
		s:    s(read(t, restricted, 30, 31), read(t, "", 34, 35), 32, 33),
		want: changed,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := judgeSighting(tc.s, tc.h)
			require.Equal(t, tc.want, got, "%s", got)
		})
	}
}

// On a store whose conditioned writes are atomic (etcd, in memory), a
// write refused for changed nodes was never seen: the status read is an
// earlier write's.
func TestJudgeSightingAtomicRefusalNeverSeen(t *testing.T) {
	done10, restricted, _ := rollingStatuses(t)
	ok := write(1, restricted, 9, OK, 1, 2)
	ok.Input.Tentative = false
	refused := write(2, restricted, 9, NodesChanged, 10, 20)
	refused.Input.Tentative = false
	_ = done10
	s := sighting{node: "node-4#2", release: rel(1, 0), first: read(t, restricted, 30, 31), second: read(t, restricted, 34, 35), asked: ms(32), answered: ms(33)}
	got, w := judgeSighting(s, []Op{ok, refused})
	require.Equal(t, served, got, "%s", got)
	require.Equal(t, ok.Call, w.Call)
}

// validating applies a conditioned status write, runs during, and then
// either keeps it or puts the status it replaced back and refuses it, as
// the Kubernetes store does when its validating listing shows a record
// the leader's summary missed.
type validating struct {
	versiongate.Store
	s       *versiongatetest.Store
	during  func()
	putBack bool
}

func (v *validating) WriteStatus(ctx context.Context, _ versiongate.Term, value []byte, nodesRev int64) error {
	old, _ := v.s.Status()
	v.s.SetStatus(value)
	v.during()
	if v.putBack {
		v.s.SetStatus(old)
		return fmt.Errorf("validating listing: %w", versiongate.ErrNodesChanged)
	}
	return nil
}

// afterRead runs hook once, armed, after a status read and before the
// read returns.
type afterRead struct {
	versiongate.Store
	armed atomic.Bool
	hook  func()
}

func (a *afterRead) ReadStatus(ctx context.Context) (versiongate.StoredStatus, error) {
	st, err := a.Store.ReadStatus(ctx)
	if a.armed.CompareAndSwap(true, false) {
		a.hook()
	}
	return st, err
}

// newRollingOnMemory returns the rolling driver's state on an in-memory
// store whose status is done10, written by a recorded writer, with one
// node of release 1.0.0 started (not yet ready).
func newRollingOnMemory(t *testing.T, observer func(versiongate.Store) versiongate.Store) (*rolling, *versiongatetest.Store, *rollingNode) {
	t.Helper()
	ctx := t.Context()
	done10, _, _ := rollingStatuses(t)
	s := versiongatetest.NewStore(versiongatetest.StoreConfig{})
	b := Backend{
		Observer:            observer(s.Conn()),
		Connect:             func(testing.TB, string) Conn { return Conn{Store: s.Conn(), Candidate: noCandidate} },
		ValidatedAfterWrite: true,
	}
	rec := b.recorder()
	h := &rolling{t: t, ctx: ctx, b: b, cfg: RollingConfig{RecordTTL: 2 * time.Second}, rec: rec, obs: rec.Wrap("observer", b.Observer)}
	seed := rec.Wrap("seed", s.Conn())
	term := versiongatetest.NewTerm("seed", 1)
	require.NoError(t, seed.Fence(ctx, term))
	require.NoError(t, seed.WriteStatus(ctx, term, []byte(done10), 0))
	n := &rollingNode{id: "node-4"}
	h.nodes = []*rollingNode{n}
	h.start(n)
	t.Cleanup(func() { h.stop(n, false) })
	return h, s, n
}

func waitReady(t *testing.T, n *rollingNode) {
	t.Helper()
	require.Eventually(t, n.gate.Ready, 10*time.Second, 5*time.Millisecond, "%s never became ready", n.id)
}

// A node of release 1.0.0 serves on done10 when a 2.0.0 leader's
// restricted write, conditioned on a listing that missed the node's
// record, is applied: the check sees the node ready under the restricted
// status. Put back and refused for changed nodes, as the Kubernetes store
// does once its validating listing shows the record, it is no violation
// (it was one to the check that judged the status read alone, as in a
// failed CI run); kept and returned OK, it is one.
func TestRollingCheckUnvalidatedWrite(t *testing.T) {
	for _, putBack := range []bool{true, false} {
		t.Run(fmt.Sprintf("put back %v", putBack), func(t *testing.T) {
			_, restricted, _ := rollingStatuses(t)
			h, s, n := newRollingOnMemory(t, func(s versiongate.Store) versiongate.Store { return s })
			waitReady(t, n)
			leader := h.rec.Wrap("leader", &validating{Store: s.Conn(), s: s, during: h.check, putBack: putBack})
			term := versiongatetest.NewTerm("leader", 2)
			require.NoError(t, leader.Fence(t.Context(), term))
			err := leader.WriteStatus(t.Context(), term, []byte(restricted), 1)
			h.check()
			require.True(t, n.gate.Ready(), "the node serves throughout")

			h.mu.Lock()
			defer h.mu.Unlock()
			counts := h.judgeSightings(h.rec.History())
			if putBack {
				require.ErrorIs(t, err, versiongate.ErrNodesChanged)
				require.Equal(t, map[verdict]int{refusedWrite: 1}, counts)
				require.Empty(t, h.violations)
				return
			}
			require.NoError(t, err)
			require.Equal(t, map[verdict]int{unreturnedWrite: 1, served: 1}, counts)
			require.Len(t, h.violations, 1)
			require.Contains(t, h.violations[0], "node-4#1@1.0.0 ready between")
		})
	}
}

// The check reads a validated restricted status; before it asks the
// node, a 1.1.0 leader lowers the minimum (every node the restricted
// status admits is compatible with 1.1.0's state) and the node of release
// 1.0.0 passes WaitReady on that. No violation: the node never served
// while the restricted status stood (the check that judged the status
// read alone called it one).
func TestRollingCheckStatusLoweredBeforeTheQuestion(t *testing.T) {
	_, restricted, lowered := rollingStatuses(t)
	var ar *afterRead
	h, s, n := newRollingOnMemory(t, func(s versiongate.Store) versiongate.Store {
		ar = &afterRead{Store: s}
		return ar
	})
	waitReady(t, n)
	ctx := t.Context()
	// Validated: node-4's record went (its node was cut off and stopped
	// serving), and it published a new one and waits.
	w2 := h.rec.Wrap("leader-2.0.0", s.Conn())
	t2 := versiongatetest.NewTerm("leader-2.0.0", 2)
	require.NoError(t, w2.Fence(ctx, t2))
	h.stop(n, false)
	require.NoError(t, w2.WriteStatus(ctx, t2, []byte(restricted), s.Revision()))
	h.start(n)
	require.Never(t, n.gate.Ready, 200*time.Millisecond, 10*time.Millisecond, "node-4 must wait on the restricted status")

	w1 := h.rec.Wrap("leader-1.1.0", s.Conn())
	t1 := versiongatetest.NewTerm("leader-1.1.0", 3)
	ar.hook = func() {
		require.NoError(t, w1.Fence(ctx, t1))
		require.NoError(t, w1.WriteStatus(ctx, t1, []byte(lowered), 0))
		waitReady(t, n)
	}
	ar.armed.Store(true)
	h.check()

	h.mu.Lock()
	defer h.mu.Unlock()
	require.Len(t, h.sightings, 1)
	require.Equal(t, restricted, h.sightings[0].first.value, "the check read the restricted status first")
	require.Equal(t, map[verdict]int{changed: 1}, h.judgeSightings(h.rec.History()))
	require.Empty(t, h.violations)
}
