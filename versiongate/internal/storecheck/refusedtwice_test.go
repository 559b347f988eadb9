package storecheck_test

import (
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/versiongate/internal/storecheck"
)

// A joiners race's history on the Kubernetes store (TestNodeLeaseProofJoinersRace),
// 338 operations, kept from a run that the search left undecided for
// 10 s, 60 s more, and 5 minutes with verifyhistory: the leader's
// restricting write was refused for changed records twice, with the same
// value, and six reads showed the second's value. The first write,
// refused before the reads were called, cannot be what they showed (its
// refusal undid it), so the second write's apply is placed before them
// and its outcome after them (see refusedBefore in model.go); while the
// first counted as a write that might have shown the value, the second's
// halves were placed anywhere in its 290 ms, amid 30 other operations
// open at once, and the search backtracked over them for good. Now decided
// in about 30 ms on this 2-core machine (go test -race -count=1 -v -run
// TestRefusedTwiceDecided ./versiongate/internal/storecheck/: "338
// operations decided in 30ms", the search in the checker program). A read of the value moved after
// the second write returned, when its refusal had undone it, is rejected.
func TestRefusedTwiceDecided(t *testing.T) {
	req := readRequest(t, "testdata/undecided-nodelease-joiners-338ops.json")
	var writes []storecheck.Op
	for _, o := range req.History {
		if o.Input.Kind == storecheck.KindWrite && o.Output.Outcome == storecheck.NodesChanged {
			writes = append(writes, o)
		}
	}
	require.Len(t, writes, 2, "refused writes")
	first, second := writes[0], writes[1]
	require.Equal(t, first.Input.Value, second.Input.Value, "the refused writes' values")
	require.Less(t, first.Return, second.Call, "the first refused before the second was called")
	var reads []int
	for i, o := range req.History {
		if o.Input.Kind == storecheck.KindRead && o.Output.Value == second.Input.Value && o.Call > second.Call {
			reads = append(reads, i)
		}
	}
	require.Len(t, reads, 6, "reads of the second refused write's value")

	// Verify searches for at most CheckTimeout: Ok is a verdict within
	// that bound (an undecided search answers Unknown).
	start := time.Now()
	require.Equal(t, porcupine.Ok, verify(t, req.History))
	t.Logf("%d operations decided in %v", len(req.History), time.Since(start))

	late := slices.Clone(req.History)
	last := late[reads[len(reads)-1]]
	last.Call, last.Return = second.Return+1, second.Return+2
	late[reads[len(reads)-1]] = last
	require.Equal(t, porcupine.Illegal, verify(t, late))
}

// A refused tentative write that had not returned when a read of its
// value was called may be what the read showed: a later write of the same
// value, refused too, is not placed around that read (which it could not
// be: it was called after the read returned). The same read after the
// first write returned shows a value nothing put there, and is rejected;
// so is one after the second returned. A first write of unknown outcome
// may have kept its value, whenever it returned: a read of it after both
// is accepted.
func TestRefusedWriteShowsUntilItReturns(t *testing.T) {
	op := func(client int, call, ret time.Duration, in storecheck.Input, out storecheck.Output) storecheck.Op {
		return storecheck.Op{Client: client, Input: in, Output: out, Call: call, Return: ret}
	}
	ok := storecheck.Output{Outcome: storecheck.OK}
	write := storecheck.Input{Kind: storecheck.KindWrite, Token: 1, Value: "v", NodesRev: 5, Tentative: true}
	refused := storecheck.Output{Outcome: storecheck.NodesChanged}
	read := func(value string) storecheck.Output {
		return storecheck.Output{Outcome: storecheck.OK, Value: value, Exists: true, Rev: 10}
	}
	history := func(firstOut storecheck.Output, readCall time.Duration) []storecheck.Op {
		return []storecheck.Op{
			op(1, 0, 1, storecheck.Input{Kind: storecheck.KindFence, Token: 1}, ok),
			op(1, 2, 3, storecheck.Input{Kind: storecheck.KindWrite, Token: 1, Value: "a"}, ok),
			op(2, 4, 5, storecheck.Input{Kind: storecheck.KindPublish, ID: "x", Value: "x"}, storecheck.Output{Outcome: storecheck.OK, Rev: 10, Lease: 1}),
			op(1, 6, 11, write, firstOut),
			op(3, readCall, readCall+1, storecheck.Input{Kind: storecheck.KindRead}, read("v")),
			op(1, 14, 19, write, refused),
		}
	}
	require.Equal(t, porcupine.Ok, verify(t, history(refused, 7)), "a read while the first write was pending")
	require.Equal(t, porcupine.Illegal, verify(t, history(refused, 12)), "a read between the two writes")
	require.Equal(t, porcupine.Ok, verify(t, history(refused, 15)), "a read while the second write was pending")
	require.Equal(t, porcupine.Illegal, verify(t, history(refused, 20)), "a read after both")
	unknown := storecheck.Output{Outcome: storecheck.Unknown}
	require.Equal(t, porcupine.Ok, verify(t, history(unknown, 20)), "a read after both, the first of unknown outcome")
}
