package kubestore_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

type eventList struct {
	mu     sync.Mutex
	events []string
}

func (e *eventList) Event(eventtype, reason, _ string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, eventtype+" "+reason)
}

func (e *eventList) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.events...)
}

// A first boot among other nodes' records is no alarm on this store: the
// status Lease the leader's Fence created holds no value, and a deleted
// status would be terminating (the finalizer), so the store proves no
// status was deleted. The leader says so at info level, with no error and
// no StatusMissing warning, and creates the status.
func TestFirstBootAmongRecordsIsInfo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var logs []string
		log := funcr.New(func(prefix, args string) {
			mu.Lock()
			defer mu.Unlock()
			logs = append(logs, args)
		}, funcr.Options{})
		ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), log))
		defer cancel()
		cs := kubefake.NewClientset()
		_, err := newStore(t, cs, "boot", nil).PublishRecord(ctx, "n0", mustNodeRecord(t, "n0", "1.1.0"), time.Hour)
		require.NoError(t, err)

		events := &eventList{}
		g, err := versiongate.New(versiongate.Config{
			Store: newStore(t, cs, "boot", nil), NodeID: "n1", Version: version(t, "1.1.0"),
			MinimumCompatibleRelease: versiongate.Release{Major: 1},
			Candidate: versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) {
				return versiongatetest.NewTerm("n1", 5), nil
			}),
			Reconcile: func(context.Context, versiongate.Term) error { return nil },
			Events:    events,
		})
		require.NoError(t, err)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); _ = g.Run(ctx) }()
		wctx, wcancel := context.WithTimeout(ctx, time.Minute)
		defer wcancel()
		require.NoError(t, g.WaitReady(wctx))
		cancel()
		wg.Wait()

		mu.Lock()
		defer mu.Unlock()
		all := strings.Join(logs, "\n")
		require.Contains(t, all, "No status was ever written")
		require.NotContains(t, all, "found no status")
		require.NotContains(t, events.list(), "Warning "+versiongate.ReasonStatusMissing)
	})
}

func mustNodeRecord(t *testing.T, id, v string) []byte {
	t.Helper()
	b, err := versiongate.EncodeNodeRelease(id, version(t, v))
	require.NoError(t, err)
	return b
}
