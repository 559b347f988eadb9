package storecheck

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/versiongate"
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
