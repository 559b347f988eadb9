package event

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tests run in testing/synctest bubbles: synctest.Wait returns once every
// goroutine is durably blocked, so "Get blocks" is observed exactly rather
// than inferred from a short timeout, and the deadlines below are on the
// bubble's clock, firing only if the test could never finish.

func TestGetReturnsCurrentThenBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var v Value[int]
		v.Set(1)
		w := v.Watch()
		defer w.Close()

		got, err := w.Get(t.Context())
		require.NoError(t, err)
		require.Equal(t, 1, got)

		res := make(chan int, 1)
		go func() {
			got, err := w.Get(t.Context())
			if err != nil {
				got = -1
			}
			res <- got
		}()
		synctest.Wait()
		select {
		case got := <-res:
			t.Fatalf("Get returned %d though nothing new was set", got)
		default:
		}
		v.Set(2)
		require.Equal(t, 2, <-res)
	})
}

func TestWatcherSkipsToNewest(t *testing.T) {
	var v Value[string]
	w := v.Watch()
	defer w.Close()
	v.Set("a")
	v.Set("b")
	v.Set("c")
	got, err := w.Get(context.Background())
	require.NoError(t, err)
	require.Equal(t, "c", got)
}

func TestGetWakesOnSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var v Value[int]
		w := v.Watch()
		defer w.Close()
		res := make(chan int, 1)
		go func() {
			got, err := w.Get(context.Background())
			if err != nil {
				got = -1
			}
			res <- got
		}()
		v.Set(42)
		select {
		case got := <-res:
			require.Equal(t, 42, got)
		case <-time.After(10 * time.Second):
			t.Fatal("Get did not wake on Set")
		}
	})
}

func TestCloseUnblocksGet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var v Value[int]
		w := v.Watch()
		errc := make(chan error, 1)
		go func() {
			_, err := w.Get(context.Background())
			errc <- err
		}()
		w.Close()
		w.Close() // idempotent
		select {
		case err := <-errc:
			require.True(t, errors.Is(err, ErrClosed))
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not unblock Get")
		}
	})
}

func TestLoad(t *testing.T) {
	var v Value[int]
	_, ok := v.Load()
	require.False(t, ok)
	v.Set(0)
	got, ok := v.Load()
	require.True(t, ok)
	require.Equal(t, 0, got)
}

// TestNoLostLatest has many watchers race a writer; each must end on the last
// value written.
func TestNoLostLatest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var v Value[int]
		const last = 1000
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			w := v.Watch()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer w.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				for {
					got, err := w.Get(ctx)
					if err != nil {
						t.Errorf("Get: %v", err)
						return
					}
					if got == last {
						return
					}
				}
			}()
		}
		for i := 1; i <= last; i++ {
			v.Set(i)
		}
		wg.Wait()
	})
}
