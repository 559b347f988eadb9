package storecheck_test

import (
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/internal/storecheck"
)

// heldByClaim is the smallest part of a rolling upgrade's history on the
// Kubernetes store that the model once rejected (seed 1795801056088642858;
// times in ns, as recorded). node-2 crashes while it publishes: its
// publish is cut after the store created the heartbeat Lease that claims
// the ID, and no record Lease is made. node-2 starts again and is refused
// as held, twice, by that heartbeat, which lives until it is judged dead
// (its TTL plus the margin); between the refusals node-3 lists the records
// and shows none of node-2, since there is none. The open publish can
// make a record for the first refusal only: the listing proves it gone.
// lingers marks the operations as the Recorder does for a store that says
// LostRecordsLinger.
func heldByClaim(lingers bool) []storecheck.Op {
	pub := func(id, value string) storecheck.Input {
		return storecheck.Input{Kind: storecheck.KindPublish, ID: id, Value: value, Lingers: lingers}
	}
	held := storecheck.Output{Outcome: storecheck.Held, Err: "versiongate: node record held by another lease: the heartbeat Lease gates/proof.node-2, renewed by \"node-2\""}
	return []storecheck.Op{
		{Client: 1, Name: "node-0#1", Input: pub("node-0", "a"), Output: storecheck.Output{Outcome: storecheck.OK, Lease: 1, Rev: 60}, Call: 5310353, Return: 186106533},
		{Client: 2, Name: "node-1#1", Input: pub("node-1", "a"), Output: storecheck.Output{Outcome: storecheck.OK, Lease: 1, Rev: 65}, Call: 19894164, Return: 286204344},
		{Client: 3, Name: "node-2#1", Input: pub("node-2", "a"), Output: storecheck.Output{Outcome: storecheck.Unknown, Err: "context canceled"}, Call: 24927415, Return: storecheck.Open},
		{Client: 4, Name: "node-2#2", Input: pub("node-2", "b"), Output: held, Call: 416311683, Return: 447434274},
		{Client: 5, Name: "node-3#2", Input: storecheck.Input{Kind: storecheck.KindList}, Output: storecheck.Output{Outcome: storecheck.OK, Rev: 72,
			Records: []versiongate.Record{{ID: "node-0", Value: []byte("a")}, {ID: "node-1", Value: []byte("a")}}}, Call: 458041453, Return: 487342100},
		{Client: 4, Name: "node-2#2", Input: pub("node-2", "b"), Output: held, Call: 544187259, Return: 586430766},
	}
}

// On a store whose publish claims the ID before it makes the record (the
// Kubernetes store's heartbeat Lease), a claim left by an earlier publish
// may refuse a publish as held while no record of the ID exists: the
// model accepts that only where the store says so (LostRecordsLinger).
// Elsewhere a refusal as held needs a record, and everywhere it needs a
// publish of the ID before it: the refused publish's own claim does not
// count.
func TestHeldByAClaimOnlyWhereTheStoreSaysSo(t *testing.T) {
	require.Equal(t, porcupine.Ok, verify(t, heldByClaim(true)), "the Kubernetes store's history")
	require.Equal(t, porcupine.Illegal, verify(t, heldByClaim(false)), "on a store whose held publish needs a record")

	// No earlier publish of the ID: nothing claims it.
	noClaim := heldByClaim(true)
	noClaim = append(noClaim[:2:2], noClaim[3:]...)
	require.Equal(t, porcupine.Illegal, verify(t, noClaim), "held with no claim before it")
	first := heldByClaim(true)[3]
	first.Call, first.Return = 1, 2
	require.Equal(t, porcupine.Illegal, verify(t, []storecheck.Op{first}), "held by its own claim")

	// An open publish's claim outlives the record it made: listed once,
	// gone from the next listing, its ID still held.
	landed := heldByClaim(true)
	shown := landed[4]
	shown.Call, shown.Return = 400000000, 410000000
	shown.Output.Rev = 70
	shown.Output.Records = append(shown.Output.Records, versiongate.Record{ID: "node-2", Value: []byte("a")})
	landed = []storecheck.Op{landed[0], landed[1], landed[2], shown, landed[4], landed[5]}
	require.Equal(t, porcupine.Ok, verify(t, landed), "held by an open publish's claim")

	// A claim outlives its record: a record published, then gone from a
	// listing, may still hold its ID.
	expired := func(lingers bool) []storecheck.Op {
		h := heldByClaim(lingers)
		return []storecheck.Op{h[0], h[4], {Client: 1, Name: "node-0#2", Input: storecheck.Input{Kind: storecheck.KindPublish, ID: "node-0", Value: "b", Lingers: lingers},
			Output: h[3].Output, Call: 600000000, Return: 700000000}}
	}
	gone := expired(true)
	gone[1].Output.Records = []versiongate.Record{}
	require.Equal(t, porcupine.Ok, verify(t, gone), "held by the claim of a record gone")
	gone = expired(false)
	gone[1].Output.Records = []versiongate.Record{}
	require.Equal(t, porcupine.Illegal, verify(t, gone), "held by a record gone, on a store whose held publish needs a record")
}
