package versiongatetest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

func newStore() (*versiongatetest.Store, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(time.Now())
	return versiongatetest.NewStore(versiongatetest.StoreConfig{Clock: clk}), clk
}

// watchAsync runs WatchRecords from rev and sends each batch's IDs.
func watchAsync(t *testing.T, st versiongate.Store, rev int64) (<-chan []string, <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	batches := make(chan []string, 16)
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		errc <- st.WatchRecords(ctx, rev, func(changes []versiongate.Record, _ int64) {
			var ids []string
			for _, c := range changes {
				ids = append(ids, c.ID)
			}
			batches <- ids
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return batches, errc
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(versiongatetest.DefaultWait):
		t.Fatalf("waiting for %s", what)
		var zero T
		return zero
	}
}

func TestKnobCut(t *testing.T) {
	s, _ := newStore()
	ctx := context.Background()
	a, other := s.Conn(), s.Conn()
	_, rev, err := a.ListRecords(ctx)
	require.NoError(t, err)
	_, errc := watchAsync(t, a, rev)
	a.Cut()
	require.ErrorIs(t, recv(t, errc, "the watch to end"), versiongatetest.ErrUnavailable)
	_, err = a.ReadStatus(ctx)
	require.ErrorIs(t, err, versiongatetest.ErrUnavailable)
	_, err = a.PublishRecord(ctx, "n", []byte("v"), time.Second)
	require.ErrorIs(t, err, versiongatetest.ErrUnavailable)
	_, err = other.ReadStatus(ctx)
	require.NoError(t, err, "a cut affects only its own connection")
	a.Heal()
	_, err = a.ReadStatus(ctx)
	require.NoError(t, err)
}

func TestKnobDropKeepAlives(t *testing.T) {
	s, clk := newStore()
	ctx := context.Background()
	a := s.Conn()
	l, err := a.PublishRecord(ctx, "n", []byte("v"), 10*time.Second)
	require.NoError(t, err)
	a.DropKeepAlives(true)
	_, err = a.KeepAlive(ctx, l)
	require.ErrorIs(t, err, versiongatetest.ErrUnavailable)
	_, err = a.ReadStatus(ctx)
	require.NoError(t, err, "only keep-alives are dropped")
	clk.Step(10 * time.Second)
	require.NoError(t, versiongatetest.Wait(ctx, "the record to expire", func() bool { return len(s.Records()) == 0 }, nil))
	a.DropKeepAlives(false)
	_, err = a.KeepAlive(ctx, l)
	require.ErrorIs(t, err, versiongate.ErrRecordLost)
}

func TestKnobFailWrites(t *testing.T) {
	s, _ := newStore()
	ctx := context.Background()
	a := s.Conn()
	term := versiongatetest.NewTerm("a", 1)
	boom := errors.New("boom")
	a.FailWrites(boom)
	require.ErrorIs(t, a.Fence(ctx, term), boom)
	require.ErrorIs(t, a.WriteStatus(ctx, term, []byte("x"), 0), boom)
	a.FailWrites(nil)
	require.NoError(t, a.Fence(ctx, term))
	require.NoError(t, a.WriteStatus(ctx, term, []byte("x"), 0))
	require.Equal(t, 1, a.StatusWrites())
}

func TestKnobPauseWatches(t *testing.T) {
	s, _ := newStore()
	ctx := context.Background()
	_, rev, err := s.ListRecords(ctx)
	require.NoError(t, err)
	batches, _ := watchAsync(t, s.Conn(), rev)
	s.PauseWatches()
	s.PutRecord("late", []byte("v"))
	require.Equal(t, []string{"late"}, s.Records(), "reads go on while watches are held back")
	select {
	case b := <-batches:
		t.Fatalf("a paused watch delivered %v", b)
	default:
	}
	s.ResumeWatches()
	require.Equal(t, []string{"late"}, recv(t, batches, "the held-back change"))
}

func TestKnobCompact(t *testing.T) {
	s, _ := newStore()
	ctx := context.Background()
	_, rev, err := s.ListRecords(ctx)
	require.NoError(t, err)
	s.PutRecord("a", []byte("v"))
	s.Compact()
	_, errc := watchAsync(t, s, rev)
	require.ErrorIs(t, recv(t, errc, "the compacted watch to fail"), versiongatetest.ErrCompacted)
}
