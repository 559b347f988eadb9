package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/reconkit/reconkit/checkpoint"
)

func main() {
	n := flag.Int("n", 500, "operations per measurement")
	size := flag.Int("size", 4096, "payload bytes")
	base := flag.String("dir", "", "directory to work in (default: the system temp dir)")
	flag.Parse()
	if err := run(*n, *size, *base); err != nil {
		fmt.Fprintln(os.Stderr, "checkpoint bench:", err)
		os.Exit(1)
	}
}

func run(n, size int, base string) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp(base, "checkpoint-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	payload := bytes.Repeat([]byte{'x'}, size)

	store, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: filepath.Join(dir, "store")})
	if err != nil {
		return err
	}
	if err := store.Initialize(ctx); err != nil {
		return err
	}
	bareDir := filepath.Join(dir, "bare")
	if err := os.Mkdir(bareDir, 0o700); err != nil {
		return err
	}
	defer store.Close()
	// Interleave the three so that background load hits all alike.
	var saves, bares, floors []time.Duration
	for i := range n {
		start := time.Now()
		if err := store.Save(ctx, checkpoint.Checkpoint{ID: "uid_" + strconv.Itoa(i), Payload: payload}); err != nil {
			return err
		}
		saves = append(saves, time.Since(start))
		start = time.Now()
		if err := bare(bareDir, payload, false); err != nil {
			return err
		}
		bares = append(bares, time.Since(start))
		start = time.Now()
		if err := bare(bareDir, payload, true); err != nil {
			return err
		}
		floors = append(floors, time.Since(start))
	}
	ms, mb, mf := median(saves), median(bares), median(floors)
	fmt.Printf("payload %d B, %d operations each, interleaved\n", size, n)
	fmt.Printf("Save                                median %8v  p90 %8v\n", ms, pct(saves, 90))
	fmt.Printf("write+fsync+rename+dir fsync        median %8v  p90 %8v  (honest floor)\n", mf, pct(floors, 90))
	fmt.Printf("write+fsync+rename                  median %8v  p90 %8v  (not durable)\n", mb, pct(bares, 90))
	fmt.Printf("Save / honest floor (median)        %.2f (goal <= 1.3)\n", float64(ms)/float64(mf))
	fmt.Printf("Save / write+fsync+rename (median)  %.2f\n", float64(ms)/float64(mb))

	// Bootstrap with 100 generations on disk.
	bdir := filepath.Join(dir, "boot")
	s100, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: bdir, MaxGenerations: 100})
	if err != nil {
		return err
	}
	if err := s100.Initialize(ctx); err != nil {
		return err
	}
	for i := range 100 {
		if err := s100.Save(ctx, checkpoint.Checkpoint{ID: "uid_" + strconv.Itoa(i), Payload: payload}); err != nil {
			return err
		}
	}
	// uid_99 runs as last-known-good, so Bootstrap only reads.
	cp, err := s100.Load(ctx, "uid_99")
	if err != nil {
		return err
	}
	if err := s100.SetState(ctx, checkpoint.State{Assigned: "uid_99", AssignedHash: cp.Hash, Active: "uid_99",
		LastKnownGood: "uid_99", LastKnownGoodHash: cp.Hash}); err != nil {
		return err
	}
	if err := s100.Close(); err != nil {
		return err
	}
	var boots []time.Duration
	for range n {
		start := time.Now()
		st, err := bootstrap(ctx, bdir)
		if err != nil {
			return err
		}
		boots = append(boots, time.Since(start))
		if st.ID != "uid_99" {
			return fmt.Errorf("bootstrap chose %q", st.ID)
		}
	}
	entries, err := os.ReadDir(filepath.Join(bdir, "checkpoints"))
	if err != nil {
		return err
	}
	fmt.Printf("Bootstrap, %d generations  median %8v  p90 %8v\n", len(entries), median(boots), pct(boots, 90))
	return nil
}

func bootstrap(ctx context.Context, dir string) (checkpoint.Status[[]byte], error) {
	store, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: dir, MaxGenerations: 100})
	if err != nil {
		return checkpoint.Status[[]byte]{}, err
	}
	defer store.Close()
	ctrl, err := checkpoint.New(checkpoint.Config[[]byte]{
		Store:    store,
		Parse:    func(b []byte) ([]byte, error) { return b, nil },
		Validate: func(b []byte) error { return nil },
		Local:    []byte("local"),
	})
	if err != nil {
		return checkpoint.Status[[]byte]{}, err
	}
	return ctrl.Bootstrap(ctx)
}

// bare writes payload to a temporary file, fsyncs it and renames it over
// dir/config; with dirSync it then fsyncs dir, as durability needs.
func bare(dir string, payload []byte, dirSync bool) error {
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(payload)
	if err == nil {
		err = f.Sync()
	}
	err = errors.Join(err, f.Close())
	if err != nil {
		return err
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, "config")); err != nil || !dirSync {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

func median(d []time.Duration) time.Duration { return pct(d, 50) }

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100].Round(time.Microsecond)
}
