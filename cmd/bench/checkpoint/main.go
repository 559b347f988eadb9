// Command checkpoint compares checkpoint.FSStore.Save with a bare
// write+fsync+rename of the same bytes, and times Bootstrap of a store
// holding 100 generations.
//
//	go run ./cmd/bench/checkpoint [-n 500] [-size 4096] [-dir /var/tmp]
//
// Run it on the file system a host would use: the ratio depends on how
// expensive fsync of a file and of a directory are there.
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
	// Interleave the two so that background load hits both alike.
	var saves, bares []time.Duration
	for i := range n {
		start := time.Now()
		if err := store.Save(ctx, checkpoint.Checkpoint{ID: "uid_" + strconv.Itoa(i), Payload: payload}); err != nil {
			return err
		}
		saves = append(saves, time.Since(start))
		start = time.Now()
		if err := bare(bareDir, payload); err != nil {
			return err
		}
		bares = append(bares, time.Since(start))
	}
	ms, mb := median(saves), median(bares)
	fmt.Printf("payload %d B, %d operations each\n", size, n)
	fmt.Printf("Save                    median %8v  p90 %8v\n", ms, pct(saves, 90))
	fmt.Printf("write+fsync+rename      median %8v  p90 %8v\n", mb, pct(bares, 90))
	fmt.Printf("ratio (median)          %.2f (goal <= 1.3)\n", float64(ms)/float64(mb))

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
	if err := s100.SetLastKnownGood(ctx, "uid_50"); err != nil {
		return err
	}
	if err := s100.SetCurrent(ctx, "uid_99", time.Now()); err != nil {
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

func bare(dir string, payload []byte) error {
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
	return os.Rename(f.Name(), filepath.Join(dir, "config"))
}

func median(d []time.Duration) time.Duration { return pct(d, 50) }

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100].Round(time.Microsecond)
}
