package checkpoint_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/checkpoint"
)

// benchPayload is the size of a typical agent configuration.
var benchPayload = bytes.Repeat([]byte("key: value # 16B"), 256) // 4 KiB

// BenchmarkSave measures FSStore.Save: temp file, fsync, rename, directory
// fsync, plus hashing, header and pruning.
func BenchmarkSave(b *testing.B) {
	ctx := context.Background()
	s, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: filepath.Join(b.TempDir(), "store")})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Initialize(ctx); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.SetBytes(int64(len(benchPayload)))
	i := 0
	for b.Loop() {
		i++
		if err := s.Save(ctx, checkpoint.Checkpoint{ID: fmt.Sprintf("uid_%d", i), Payload: benchPayload}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBareWriteFsyncRename is the baseline: the same bytes written to a
// temporary file, fsynced and renamed, with no directory fsync.
func BenchmarkBareWriteFsyncRename(b *testing.B) {
	dir := b.TempDir()
	target := filepath.Join(dir, "config")
	b.SetBytes(int64(len(benchPayload)))
	for b.Loop() {
		f, err := os.CreateTemp(dir, ".tmp-*")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(benchPayload); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(f.Name(), target); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBootstrap100 measures Bootstrap (open, index, load, parse,
// validate) of a store holding 100 generations.
func BenchmarkBootstrap100(b *testing.B) {
	ctx := context.Background()
	dir := filepath.Join(b.TempDir(), "store")
	s, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: dir, MaxGenerations: 100})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Initialize(ctx); err != nil {
		b.Fatal(err)
	}
	for i := range 100 {
		if err := s.Save(ctx, checkpoint.Checkpoint{ID: fmt.Sprintf("uid_%d", i), Payload: []byte(fmt.Sprintf("level=%d", i%9+1))}); err != nil {
			b.Fatal(err)
		}
	}
	setRefs(b, s, "uid_99", "uid_99") // running last-known-good: Bootstrap writes nothing
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(t0)
	for b.Loop() {
		store, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: dir, MaxGenerations: 100})
		if err != nil {
			b.Fatal(err)
		}
		ctrl, err := checkpoint.New(checkpoint.Config[agentConfig]{
			Store: store, Parse: parseAgent, Validate: validateAgent, Local: agentConfig{Level: 1},
			TrialDuration: time.Hour, Clock: clk,
		})
		if err != nil {
			b.Fatal(err)
		}
		st, err := ctrl.Bootstrap(ctx)
		if err != nil || st.ID != "uid_99" {
			b.Fatal(st, err)
		}
		if err := store.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
