package checkpoint_test

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/checkpoint"
)

// fullFS is the OS file system of a disk with room for small files only:
// a write of more than limit bytes fails with ENOSPC. It counts the
// checkpoint files it was asked to write that did not fit.
type fullFS struct {
	checkpoint.OSFS
	limit int

	mu      sync.Mutex
	refused int
}

func (f *fullFS) Create(name string, perm fs.FileMode) (checkpoint.File, error) {
	file, err := f.OSFS.Create(name, perm)
	if err != nil {
		return nil, err
	}
	return &limitedFile{File: file, fs: f}, nil
}

func (f *fullFS) refusals() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused
}

type limitedFile struct {
	checkpoint.File
	fs *fullFS
}

func (l *limitedFile) Write(p []byte) (int, error) {
	l.fs.mu.Lock()
	full := len(p) > l.fs.limit
	if full {
		l.fs.refused++
	}
	l.fs.mu.Unlock()
	if full {
		return 0, &fs.PathError{Op: "write", Path: "checkpoint", Err: syscall.ENOSPC}
	}
	return l.File.Write(p)
}

// chanSource delivers what the test sends, one delivery at a time, and
// counts the deliveries the controller has returned from.
type chanSource struct {
	deliveries chan delivery
	mu         sync.Mutex
	returned   int
}

type delivery struct {
	payload []byte
	src     checkpoint.Source
}

func (s *chanSource) Watch(ctx context.Context, assign func(context.Context, []byte, checkpoint.Source)) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case d := <-s.deliveries:
			assign(ctx, d.payload, d.src)
			s.mu.Lock()
			s.returned++
			s.mu.Unlock()
		}
	}
}

func (s *chanSource) done() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.returned
}

// runOnFullDisk runs, until the test ends, a Controller bootstrapped on an
// FSStore whose disk refuses writes past 64 KiB, fed by a channel source,
// on a fake clock; it returns once the Controller waits.
func runOnFullDisk(t *testing.T) (*checkpoint.Controller[agentConfig], *clocktesting.FakeClock, *fullFS, *chanSource) {
	t.Helper()
	return runOnFullDiskRand(t, nil)
}

// runOnFullDiskRand is runOnFullDisk with Config.Rand r.
func runOnFullDiskRand(t *testing.T, r func() float64) (*checkpoint.Controller[agentConfig], *clocktesting.FakeClock, *fullFS, *chanSource) {
	t.Helper()
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	disk := &fullFS{limit: 64 << 10}
	store, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: t.TempDir(), FS: disk})
	require.NoError(t, err)
	source := &chanSource{deliveries: make(chan delivery)}
	ctrl, err := checkpoint.New(checkpoint.Config[agentConfig]{
		Store: store, Parse: parseAgent, Validate: validateAgent, Local: agentConfig{Level: 1},
		TrialDuration: trial, CheckInterval: interval, Source: source, Clock: clk, Rand: r,
	})
	require.NoError(t, err)
	_, err = ctrl.Bootstrap(ctx)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		require.NoError(t, store.Close())
	})
	synctest.Wait()
	return ctrl, clk, disk, source
}

// TestDeliverySupersedesFailingSave: a delivery whose Save keeps failing
// (ENOSPC on a large payload) does not hold up the source, is retried
// with backoff (a bounded number of tries per hour of fake time), is
// reported in the condition, and stops being retried the moment a newer
// delivery comes; the newer one is taken at once.
func TestDeliverySupersedesFailingSave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl, clk, disk, source := runOnFullDisk(t)

		big := []byte("level=5" + strings.Repeat(" ", 128<<10)) // twice what the disk takes
		source.deliveries <- delivery{big, src("big", "1")}
		synctest.Wait()
		require.Equal(t, 1, source.done(), "the source is not held up by a failing Save")
		require.Equal(t, 1, disk.refusals())
		st := ctrl.Status()
		require.Equal(t, checkpoint.PhaseLocal, st.Phase)
		require.Equal(t, checkpoint.ConditionFalse, st.Condition.Status)
		require.Equal(t, checkpoint.ReasonSaveFailed, st.Condition.Reason)
		require.Contains(t, st.Condition.Message, `"big_1"`)
		require.Contains(t, st.Condition.Message, "no space left")

		// Retried with backoff: its waits grow to 30 s (±20%), so an hour
		// holds at most 3600/24 tries after the first few.
		const hour = time.Hour
		for range int(hour / (10 * time.Second)) {
			clk.Step(10 * time.Second)
			synctest.Wait()
		}
		tries := disk.refusals()
		require.Greater(t, tries, 100, "the delivery is retried")
		require.LessOrEqual(t, tries, int(hour/(24*time.Second))+15, "the retry waits")

		// The same delivery again (a relist) does not start a second retry.
		source.deliveries <- delivery{big, src("big", "1")}
		synctest.Wait()
		require.Equal(t, 2, source.done())
		require.Equal(t, tries, disk.refusals())

		// A newer delivery is taken at once, without waiting for the
		// failing one's next try, and ends its retry.
		source.deliveries <- delivery{[]byte("level=6"), src("small", "2")}
		synctest.Wait()
		require.Equal(t, 3, source.done())
		st = ctrl.Status()
		require.Equal(t, checkpoint.PhaseTrial, st.Phase, "status %+v", st)
		require.Equal(t, "small_2", st.ID)
		require.Equal(t, checkpoint.ReasonTrial, st.Condition.Reason)
		refused := disk.refusals()
		for range 30 {
			clk.Step(time.Minute)
			synctest.Wait()
		}
		require.Equal(t, refused, disk.refusals(), "the superseded delivery is no longer tried")
		require.Equal(t, "small_2", ctrl.Status().ID)
	})
}

// TestAssignSupersedesRetriedDelivery: the host's own Assign is newer than
// a delivery being retried, which then stops; the retry cannot overwrite
// the host's assignment when its Save starts working again.
func TestAssignSupersedesRetriedDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		ctrl, clk, disk, source := runOnFullDisk(t)

		source.deliveries <- delivery{[]byte("level=5" + strings.Repeat(" ", 1<<20)), src("big", "1")}
		synctest.Wait()
		st, err := ctrl.Assign(ctx, []byte("level=7"), src("host", "1"))
		require.NoError(t, err)
		require.Equal(t, "host_1", st.ID)
		refused := disk.refusals()
		disk.mu.Lock()
		disk.limit = 4 << 20 // room again
		disk.mu.Unlock()
		for range 10 {
			clk.Step(time.Minute)
			synctest.Wait()
		}
		require.Equal(t, refused, disk.refusals())
		require.Equal(t, "host_1", ctrl.Status().ID, fmt.Sprintf("%+v", ctrl.Status()))
	})
}
