package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/checkpoint"
)

// A host assigns a configuration, restarts during the trial, and the
// failing health probe rolls it back to the local configuration.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "checkpoint-example")
	defer os.RemoveAll(dir)

	type config struct{ Workers int }
	statuses := make(chan checkpoint.Status[config], 10)
	var store *checkpoint.FSStore
	newController := func(probe func(context.Context, config) error) *checkpoint.Controller[config] {
		if store != nil {
			store.Close() // the process exits, releasing the store's lock
		}
		store, _ = checkpoint.NewFS(checkpoint.FSConfig{Dir: filepath.Join(dir, "store")})
		ctrl, err := checkpoint.New(checkpoint.Config[config]{
			Store: store,
			Parse: func(b []byte) (config, error) {
				n, err := strconv.Atoi(strings.TrimPrefix(string(b), "workers="))
				return config{Workers: n}, err
			},
			Validate: func(c config) error {
				if c.Workers < 1 {
					return errors.New("workers must be positive")
				}
				return nil
			},
			Local:         config{Workers: 1},
			TrialDuration: time.Hour,
			Probe:         probe,
			OnStatus:      func(st checkpoint.Status[config]) { statuses <- st },
			Clock:         clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)),
		})
		if err != nil {
			fmt.Println(err)
		}
		return ctrl
	}

	ctrl := newController(nil)
	st, _ := ctrl.Bootstrap(ctx)
	fmt.Println(st.Phase, st.Config.Workers, st.Condition.Reason)

	st, _ = ctrl.Assign(ctx, []byte("workers=8"), checkpoint.Source{UID: "cm-uid", ResourceVersion: "7"})
	fmt.Println(st.Phase, st.ID, st.Config.Workers)

	// The host restarts: the trial starts again, with one start fewer left.
	ctrl = newController(func(context.Context, config) error { return errors.New("queue backing up") })
	st, _ = ctrl.Bootstrap(ctx)
	fmt.Println(st.Phase, st.ID, st.Config.Workers, st.TriesLeft)

	// Run's first trial check calls the probe, which fails; OnStatus
	// hears of the rollback.
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- ctrl.Run(runCtx) }()
	deadline := time.After(time.Minute) // a hung controller fails the example
wait:
	for st.Phase != checkpoint.PhaseRolledBack {
		select {
		case st = <-statuses:
		case <-deadline:
			fmt.Println("no rollback within a minute")
			break wait
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute):
		fmt.Println("Run did not return within a minute of its context ending")
	}
	fmt.Println(st.Phase, st.Config.Workers, st.Condition.Status, st.Condition.Reason)
	fmt.Println(st.Condition.Message)
	store.Close()
	// Output:
	// Local 1 LocalConfig
	// Trial cm-uid_7 8
	// Trial cm-uid_7 8 1
	// RolledBack 1 False TrialProbeFailed
	// health probe failed during the trial of checkpoint "cm-uid_7": queue backing up; using the local configuration
}
