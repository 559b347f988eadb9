package checkpointtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/checkpoint"
)

// TB is what the suite's checks need from a test: *testing.T implements
// it, and so does the recorder Check uses.
type TB interface {
	require.TestingT
	Helper()
}

type testCase struct {
	name string
	fn   func(t TB, s checkpoint.LKGStore)
}

var cases = []testCase{
	{"Empty", testEmpty},
	{"InitializeIdempotent", testInitializeIdempotent},
	{"SaveLoad", testSaveLoad},
	{"PayloadCopied", testPayloadCopied},
	{"EmptyPayload", testEmptyPayload},
	{"SaveSameIsNoop", testSaveSame},
	{"SaveConflict", testSaveConflict},
	{"SaveWrongHash", testSaveWrongHash},
	{"LoadMissing", testLoadMissing},
	{"InvalidIDs", testInvalidIDs},
	{"SetState", testSetState},
	{"StateCopied", testStateCopied},
	{"SetStateMissing", testSetStateMissing},
	{"SetStateInvalid", testSetStateInvalid},
	{"CancelledContext", testCancelled},
	{"Concurrent", testConcurrent},
}

// Run runs the conformance suite as subtests of t. newStore returns a new,
// empty store for one subtest; Run calls Initialize on it. Stores must keep
// at least 4 checkpoints of history.
func Run(t *testing.T, newStore func(t *testing.T) checkpoint.LKGStore) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			require.NoError(t, s.Initialize(context.Background()))
			tc.fn(t, s)
		})
	}
}

// Check runs the conformance suite outside a test, as a program checking a
// store would, and returns every failure joined, or nil. newStore returns a
// new, empty store for one case; Check calls Initialize on it. Cases run one
// after another.
func Check(newStore func() (checkpoint.LKGStore, error)) error {
	var errs []error
	for _, tc := range cases {
		r := &recorder{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() {
				if p := recover(); p != nil {
					r.Errorf("panic: %v", p)
				}
			}()
			s, err := newStore()
			if err != nil {
				r.Errorf("new store: %v", err)
				return
			}
			if err := s.Initialize(context.Background()); err != nil {
				r.Errorf("initialize: %v", err)
				return
			}
			tc.fn(r, s)
		}()
		<-done
		for _, msg := range r.msgs {
			errs = append(errs, fmt.Errorf("checkpointtest: %s: %s", tc.name, msg))
		}
	}
	return errors.Join(errs...)
}

// recorder collects failures; FailNow ends the goroutine running the case.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (r *recorder) FailNow() { runtime.Goexit() }

func ckpt(id, payload string) checkpoint.Checkpoint {
	return checkpoint.Checkpoint{
		ID:      id,
		Payload: []byte(payload),
		Source:  checkpoint.Source{UID: "uid-" + id, ResourceVersion: "7", Origin: "test " + id},
		Created: time.Unix(1700000000, 123456789),
	}
}

func requireState(t TB, s checkpoint.LKGStore, assigned, lkg string) {
	t.Helper()
	st, err := s.State(context.Background())
	require.NoError(t, err)
	require.Equal(t, assigned, st.Assigned, "assigned")
	require.Equal(t, lkg, st.LastKnownGood, "last-known-good")
}

// assign returns st with id (payload p) assigned and active.
func assign(st checkpoint.State, id, p string) checkpoint.State {
	st.Assigned, st.AssignedHash, st.Active = id, checkpoint.HashPayload([]byte(p)), id
	return st
}

func testEmpty(t TB, s checkpoint.LKGStore) {
	st, err := s.State(context.Background())
	require.NoError(t, err)
	require.Equal(t, checkpoint.State{}, st, "state of an empty store")
}

func testInitializeIdempotent(t TB, s checkpoint.LKGStore) {
	ctx := context.Background()
	require.NoError(t, s.Save(ctx, ckpt("a", "A")))
	require.NoError(t, s.SetState(ctx, assign(checkpoint.State{}, "a", "A")))
	require.NoError(t, s.Initialize(ctx))
	requireState(t, s, "a", "")
	cp, err := s.Load(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "A", string(cp.Payload))
}

func testSaveLoad(t TB, s checkpoint.LKGStore) {
	ctx := context.Background()
	in := ckpt("uid-1_42", "kind: Config\nvalue: 1\n")
	require.NoError(t, s.Save(ctx, in))
	out, err := s.Load(ctx, in.ID)
	require.NoError(t, err)
	require.Equal(t, in.ID, out.ID)
	require.Equal(t, in.Payload, out.Payload)
	require.Equal(t, checkpoint.HashPayload(in.Payload), out.Hash)
	require.True(t, strings.HasPrefix(out.Hash, "sha256:"), out.Hash)
	require.Equal(t, in.Source, out.Source)
	require.True(t, in.Created.Equal(out.Created), "created %v, want %v", out.Created, in.Created)
	// Saving does not change current or last-known-good.
	requireState(t, s, "", "")
}

func testPayloadCopied(t TB, s checkpoint.LKGStore) {
	ctx := context.Background()
	in := ckpt("a", "original")
	require.NoError(t, s.Save(ctx, in))
	in.Payload[0] = 'X'
	out, err := s.Load(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "original", string(out.Payload), "store kept the caller's slice")
	out.Payload[0] = 'Y'
	again, err := s.Load(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "original", string(again.Payload), "store handed out its own slice")
}

func testEmptyPayload(t TB, s checkpoint.LKGStore) {
	ctx := context.Background()
	require.NoError(t, s.Save(ctx, ckpt("empty", "")))
	out, err := s.Load(ctx, "empty")
	require.NoError(t, err)
	require.Empty(t, out.Payload)
	require.Equal(t, checkpoint.HashPayload(nil), out.Hash)
}

func testSaveSame(t TB, s checkpoint.LKGStore) {
	ctx := context.Background()
	require.NoError(t, s.Save(ctx, ckpt("a", "A")))
	require.NoError(t, s.Save(ctx, ckpt("a", "A")), "saving identical content again")
	out, err := s.Load(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "A", string(out.Payload))
}

func testSaveConflict(t TB, s checkpoint.LKGStore) {
	ctx := context.Background()
	require.NoError(t, s.Save(ctx, ckpt("a", "A")))
	err := s.Save(ctx, ckpt("a", "B"))
	require.ErrorIs(t, err, checkpoint.ErrConflict)
	out, err := s.Load(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "A", string(out.Payload), "conflicting save changed the checkpoint")
}

func testSaveWrongHash(t TB, s checkpoint.LKGStore) {
	ctx := context.Background()
	cp := ckpt("a", "A")
	cp.Hash = checkpoint.HashPayload([]byte("B"))
	require.ErrorIs(t, s.Save(ctx, cp), checkpoint.ErrCorrupt)
	_, err := s.Load(ctx, "a")
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	cp.Hash = checkpoint.HashPayload([]byte("A"))
	require.NoError(t, s.Save(ctx, cp))
}

func testLoadMissing(t TB, s checkpoint.LKGStore) {
	_, err := s.Load(context.Background(), "nope")
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
}

// BadIDs are IDs every store must reject with checkpoint.ErrInvalidID.
var BadIDs = []string{
	"", ".", "..", "../x", "a/b", `a\b`, "/abs", "a\x00b", "a\nb", "tab\there", "del\x7f",
	strings.Repeat("x", checkpoint.MaxIDLength+1), "\xff\xfe",
}

func testInvalidIDs(t TB, s checkpoint.LKGStore) {
	ctx := context.Background()
	for _, id := range BadIDs {
		require.ErrorIs(t, checkpoint.ValidateID(id), checkpoint.ErrInvalidID, "ValidateID(%q)", id)
		require.ErrorIs(t, s.Save(ctx, ckpt(id, "x")), checkpoint.ErrInvalidID, "Save(%q)", id)
		_, err := s.Load(ctx, id)
		require.ErrorIs(t, err, checkpoint.ErrInvalidID, "Load(%q)", id)
		if id == "" {
			continue // "" means local for the setters
		}
		require.ErrorIs(t, s.SetState(ctx, assign(checkpoint.State{}, id, "x")), checkpoint.ErrInvalidID, "SetState(assigned %q)", id)
		require.ErrorIs(t, s.SetState(ctx, checkpoint.State{LastKnownGood: id, LastKnownGoodHash: checkpoint.HashPayload(nil)}), checkpoint.ErrInvalidID, "SetState(last-known-good %q)", id)
	}
	requireState(t, s, "", "")
	// The longest allowed ID and unusual but harmless characters work.
	for _, id := range []string{strings.Repeat("y", checkpoint.MaxIDLength), "..a", "a..b", ".hidden", "ü ñ:@=+"} {
		require.NoError(t, s.Save(ctx, ckpt(id, id)), "Save(%q)", id)
		out, err := s.Load(ctx, id)
		require.NoError(t, err, "Load(%q)", id)
		require.Equal(t, id, string(out.Payload))
	}
}

func testSetState(t TB, s checkpoint.LKGStore) {
	ctx := context.Background()
	require.NoError(t, s.Save(ctx, ckpt("a", "A")))
	require.NoError(t, s.Save(ctx, ckpt("b", "B")))
	bad := checkpoint.Failure{Hash: checkpoint.HashPayload([]byte("B")), ID: "b", Reason: "TrialProbeFailed", Message: "probe", At: time.Unix(3000, 7)}
	want := checkpoint.State{
		Assigned: "b", AssignedHash: checkpoint.HashPayload([]byte("B")), AssignedAt: time.Unix(1000, 5),
		Active: "a", LastKnownGood: "a", LastKnownGoodHash: checkpoint.HashPayload([]byte("A")), TriesLeft: 2,
		Error: &bad, Rejected: []checkpoint.Failure{bad},
	}
	require.NoError(t, s.SetState(ctx, want))
	got, err := s.State(ctx)
	require.NoError(t, err)
	requireStateEqual(t, want, got)
	require.NoError(t, s.Initialize(ctx))
	got, err = s.State(ctx)
	require.NoError(t, err)
	requireStateEqual(t, want, got)

	require.NoError(t, s.SetState(ctx, checkpoint.State{}))
	requireState(t, s, "", "")
	_, err = s.Load(ctx, "a")
	require.NoError(t, err, "clearing the state deleted a checkpoint")
}

// requireStateEqual compares states, times by instant.
func requireStateEqual(t TB, want, got checkpoint.State) {
	t.Helper()
	require.True(t, want.AssignedAt.Equal(got.AssignedAt), "assigned at %v, want %v", got.AssignedAt, want.AssignedAt)
	got.AssignedAt, want.AssignedAt = time.Time{}, time.Time{}
	norm := func(f *checkpoint.Failure) {
		if f != nil {
			f.At = time.Unix(0, f.At.UnixNano())
		}
	}
	norm(want.Error)
	norm(got.Error)
	for i := range want.Rejected {
		norm(&want.Rejected[i])
	}
	for i := range got.Rejected {
		norm(&got.Rejected[i])
	}
	require.Equal(t, want, got)
}

func testStateCopied(t TB, s checkpoint.LKGStore) {
	ctx := context.Background()
	require.NoError(t, s.Save(ctx, ckpt("a", "A")))
	f := checkpoint.Failure{Hash: checkpoint.HashPayload([]byte("A")), Reason: "R"}
	in := assign(checkpoint.State{}, "a", "A").Reject(f)
	require.NoError(t, s.SetState(ctx, in))
	in.Rejected[0].Reason, in.Error.Reason = "changed", "changed"
	out, err := s.State(ctx)
	require.NoError(t, err)
	require.Len(t, out.Rejected, 1)
	require.NotNil(t, out.Error)
	require.Equal(t, "R", out.Rejected[0].Reason, "store kept the caller's slice")
	require.Equal(t, "R", out.Error.Reason, "store kept the caller's pointer")
	out.Rejected[0].Reason = "changed"
	again, err := s.State(ctx)
	require.NoError(t, err)
	require.Len(t, again.Rejected, 1)
	require.Equal(t, "R", again.Rejected[0].Reason, "store handed out its own slice")
}

func testSetStateMissing(t TB, s checkpoint.LKGStore) {
	ctx := context.Background()
	require.ErrorIs(t, s.SetState(ctx, assign(checkpoint.State{}, "ghost", "G")), checkpoint.ErrNotFound)
	require.ErrorIs(t, s.SetState(ctx, checkpoint.State{LastKnownGood: "ghost", LastKnownGoodHash: checkpoint.HashPayload(nil)}), checkpoint.ErrNotFound)
	requireState(t, s, "", "")
}

func testSetStateInvalid(t TB, s checkpoint.LKGStore) {
	ctx := context.Background()
	require.NoError(t, s.Save(ctx, ckpt("a", "A")))
	for _, st := range []checkpoint.State{
		{Assigned: "a"}, // no hash
		{Assigned: "a", AssignedHash: "md5:1234"},
		{LastKnownGood: "a"},
		{TriesLeft: -1},
		{Rejected: make([]checkpoint.Failure, checkpoint.MaxRejected+1)},
	} {
		require.ErrorIs(t, s.SetState(ctx, st), checkpoint.ErrInvalidState, "%+v", st)
	}
	requireState(t, s, "", "")
}

func testCancelled(t TB, s checkpoint.LKGStore) {
	require.NoError(t, s.Save(context.Background(), ckpt("a", "A")))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, s.Save(ctx, ckpt("b", "B")), context.Canceled)
	_, err := s.Load(ctx, "a")
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, s.SetState(ctx, assign(checkpoint.State{}, "a", "A")), context.Canceled)
	_, err = s.State(ctx)
	require.ErrorIs(t, err, context.Canceled)
	requireState(t, s, "", "")
	_, err = s.Load(context.Background(), "b")
	require.ErrorIs(t, err, checkpoint.ErrNotFound, "cancelled Save stored a checkpoint")
}

func testConcurrent(t TB, s checkpoint.LKGStore) {
	ctx := context.Background()
	const workers, each = 4, 3 // 12 checkpoints, more than the suite's minimum history
	var wg sync.WaitGroup
	errs := make(chan error, workers*each*4)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				payload := []byte(strings.Repeat(id, 10))
				if err := s.Save(ctx, checkpoint.Checkpoint{ID: id, Payload: payload}); err != nil {
					errs <- err
					continue
				}
				if err := s.SetState(ctx, assign(checkpoint.State{}, id, string(payload))); err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
					// ErrNotFound: another worker's Save pruned it first.
					errs <- err
				}
				cp, err := s.Load(ctx, id)
				switch {
				case errors.Is(err, checkpoint.ErrNotFound):
					// Pruned by another worker's Save after SetCurrent moved on.
				case err != nil:
					errs <- err
				case !bytes.Equal(cp.Payload, payload):
					errs <- fmt.Errorf("load %s: got %q", id, cp.Payload)
				}
				if _, err := s.State(ctx); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st, err := s.State(ctx)
	require.NoError(t, err)
	cur := st.Assigned
	require.NotEmpty(t, cur)
	_, err = s.Load(ctx, cur)
	require.NoError(t, err, "current checkpoint %q not loadable", cur)
}
