package storecheck

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/versiongate"
)

// The checker program receives the history as JSON: every field the model
// reads must survive the trip, an empty record value apart from a deleted
// (nil) one, and an open return time.
func TestHistoryRoundTrip(t *testing.T) {
	h := []Op{
		{Client: 1, Name: "a", Input: Input{Kind: KindPublish, ID: "a", Value: "v"}, Output: Output{Outcome: OK, Lease: 3, Rev: 4}, Call: time.Millisecond, Return: 2 * time.Millisecond},
		{Client: 2, Name: "leader", Input: Input{Kind: KindList}, Output: Output{Outcome: OK, Rev: 5, Records: []versiongate.Record{{ID: "a", Value: []byte{}}, {ID: "b", Value: []byte("x")}}}, Call: 3 * time.Millisecond, Return: 4 * time.Millisecond},
		{Client: 2, Name: "leader", Input: Input{Kind: KindWrite, Token: 7, NodesRev: 5, Tentative: true, Guarded: true, Value: "s"}, Output: Output{Outcome: Unknown, Err: "timeout"}, Call: 5 * time.Millisecond, Return: Open},
		{Client: 3, Name: "b", Input: Input{Kind: KindRead}, Output: Output{Outcome: OK, Value: "s", Exists: true, Rev: 9}, Call: 6 * time.Millisecond, Return: 7 * time.Millisecond},
	}
	b, err := json.Marshal(ChildRequest{History: h, Dir: "d"})
	require.NoError(t, err)
	var got ChildRequest
	require.NoError(t, json.Unmarshal(b, &got))
	require.Equal(t, h, got.History)
	require.Equal(t, "d", got.Dir)
}

// A request the program cannot decode is answered with an error, not a
// verdict.
func TestServeRejectsGarbage(t *testing.T) {
	var res ChildResult
	require.NoError(t, json.Unmarshal(Serve([]byte("{")), &res))
	require.NotEmpty(t, res.Err)
}

// The checker program gives the verdicts this process gives, for a
// history the model accepts and one it rejects (a conditioned write that
// stood over a record published after the listing it was conditioned on,
// and kept alive after it).
func TestVerifyInChildAgrees(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the checker program with the go command; skipped under -short")
	}
	legal := []Op{
		{Client: 1, Name: "a", Input: Input{Kind: KindPublish, ID: "a", Value: "a"}, Output: Output{Outcome: OK, Lease: 1, Rev: 2}, Call: 1, Return: 2},
		{Client: 2, Name: "leader", Input: Input{Kind: KindList}, Output: Output{Outcome: OK, Rev: 2, Records: []versiongate.Record{{ID: "a", Value: []byte("a")}}}, Call: 3, Return: 4},
	}
	illegal := append(append([]Op(nil), legal...),
		Op{Client: 3, Name: "b", Input: Input{Kind: KindPublish, ID: "b", Value: "b"}, Output: Output{Outcome: OK, Lease: 2, Rev: 3}, Call: 5, Return: 6},
		Op{Client: 2, Name: "leader", Input: Input{Kind: KindFence, Token: 7}, Output: Output{Outcome: OK}, Call: 7, Return: 8},
		Op{Client: 2, Name: "leader", Input: Input{Kind: KindWrite, Token: 7, NodesRev: 2, Value: "s"}, Output: Output{Outcome: OK}, Call: 9, Return: 10},
		// b was alive throughout: a record may expire unseen, but not
		// come back.
		Op{Client: 3, Name: "b", Input: Input{Kind: KindKeepAlive, ID: "b", Lease: 2}, Output: Output{Outcome: OK}, Call: 11, Return: 12},
	)
	for h, want := range map[*[]Op]porcupine.CheckResult{&legal: porcupine.Ok, &illegal: porcupine.Illegal} {
		here, _, err := verifyHere(*h, t.TempDir(), CheckTimeout)
		require.NoError(t, err)
		require.Equal(t, want, here)
		got, path, err := verifyInChild(*h, t.TempDir(), CheckTimeout)
		require.NoError(t, err)
		require.Equal(t, want, got)
		if got == porcupine.Illegal {
			require.FileExists(t, path)
		}
	}
}

// A checker program already built (VerifierEnv, which WithVerifier sets
// for a test binary's run) is the one run: no other is built. Here the
// program named is missing, and the check says so.
func TestVerifierFromTheEnvironment(t *testing.T) {
	if !raceEnabled {
		t.Skip("only a race-enabled binary checks in a child")
	}
	missing := t.TempDir() + "/no-such-checker"
	t.Setenv(VerifierEnv, missing)
	_, _, err := verifyInChild(nil, t.TempDir(), CheckTimeout)
	require.ErrorContains(t, err, missing)
}
