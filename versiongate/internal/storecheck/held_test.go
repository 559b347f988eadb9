package storecheck_test

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/internal/storecheck"
)

// The Kubernetes store lists a record it saw deleted while the heartbeat
// the record named may still be renewed (its node may still serve), and
// says so (storecheck.HeldLister): the model accepts such a held record
// after its deletion, and only one that is or was the model's record of
// that ID with that value. Unmarked, the same listing is a stale read.
func TestHeldRecordListedAfterItsDeletion(t *testing.T) {
	list := func(rev int64, held []string, recs ...versiongate.Record) storecheck.Op {
		return storecheck.Op{Client: 2, Name: "b", Input: storecheck.Input{Kind: storecheck.KindList},
			Output: storecheck.Output{Outcome: storecheck.OK, Rev: rev, Records: recs, Held: held}, Call: 5, Return: 6}
	}
	a := versiongate.Record{ID: "a", Value: []byte("a")}
	deleted := func(last storecheck.Op) []storecheck.Op {
		return []storecheck.Op{
			{Client: 1, Name: "a", Input: storecheck.Input{Kind: storecheck.KindPublish, ID: "a", Value: "a", Lingers: true}, Output: storecheck.Output{Outcome: storecheck.OK, Lease: 1, Rev: 2}, Call: 1, Return: 2},
			{Client: 1, Name: "a", Input: storecheck.Input{Kind: storecheck.KindDelete, ID: "a", Lease: 1}, Output: storecheck.Output{Outcome: storecheck.OK}, Call: 3, Return: 4},
			last,
		}
	}
	require.Equal(t, porcupine.Ok, verify(t, deleted(list(4, []string{"a"}, a))), "held after its deletion")
	require.Equal(t, porcupine.Illegal, verify(t, deleted(list(4, nil, a))), "listed after its deletion, not held")
	require.Equal(t, porcupine.Illegal, verify(t, deleted(list(4, []string{"a"}, versiongate.Record{ID: "a", Value: []byte("b")}))),
		"held with a value the record never had")
	require.Equal(t, porcupine.Illegal, verify(t, []storecheck.Op{list(4, []string{"a"}, a)}), "held, never a record")

	// A held record shows that no record of its ID was listed: a record
	// published again in between is gone by then.
	again := append(deleted(list(6, []string{"a"}, a))[:2],
		storecheck.Op{Client: 3, Name: "a#2", Input: storecheck.Input{Kind: storecheck.KindPublish, ID: "a", Value: "a2", Lingers: true}, Output: storecheck.Output{Outcome: storecheck.OK, Lease: 2, Rev: 5}, Call: 3, Return: 4},
		list(6, []string{"a"}, a))
	require.Equal(t, porcupine.Ok, verify(t, again))
	kept := append(again, storecheck.Op{Client: 3, Name: "a#2", Input: storecheck.Input{Kind: storecheck.KindKeepAlive, ID: "a", Lease: 2, Lingers: true}, Output: storecheck.Output{Outcome: storecheck.OK}, Call: 7, Return: 8})
	require.Equal(t, porcupine.Illegal, verify(t, kept), "a record kept alive after a listing held its ID's old one")

	// Beside a record an open publish made (taken effect just before the
	// listing), the held one needs none.
	b := versiongate.Record{ID: "b", Value: []byte("b")}
	open := append(deleted(list(6, []string{"a"}, a, b))[:2],
		storecheck.Op{Client: 3, Name: "b", Input: storecheck.Input{Kind: storecheck.KindPublish, ID: "b", Value: "b", Lingers: true}, Output: storecheck.Output{Outcome: storecheck.Unknown}, Call: 3, Return: storecheck.Open},
		list(6, []string{"a"}, a, b))
	require.Equal(t, porcupine.Ok, verify(t, open), "a held record beside one an open publish made")
}

// A rolling upgrade's history on the Kubernetes store, 726 operations,
// from a run that the check found not linearizable: node-1's first
// record, an orphan once its heartbeat was gone, was deleted by its
// node's next publish just as the apiserver restarted; the leader's store
// could not read the heartbeat the record named, held the deletion, and
// listed the record 3 revisions after the deletion another store's watch
// reported. The listing is marked held, as the recorder now marks it,
// and the history is decided at once.
func TestRollingHeldListingDecided(t *testing.T) {
	req := readRequest(t, "testdata/rolling-held-listing.json")
	held := 0
	for _, o := range req.History {
		if o.Input.Kind == storecheck.KindList && len(o.Output.Held) > 0 {
			held++
		}
	}
	require.Equal(t, 1, held, "listings with a held record")
	start := time.Now()
	require.Equal(t, porcupine.Ok, verify(t, req.History))
	t.Logf("%d operations decided in %v", len(req.History), time.Since(start))
}
