package versiongate

import (
	"context"
	"strconv"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/reconkit/reconkit/internal/event"
)

// A watch that starts below the compacted revision fails with
// ErrCompacted; run answers such a failure by listing again, and the new
// listing reflects every change.
func TestTrackerCompactionRelists(t *testing.T) {
	_, cli := etcdClient(t)
	ctx := testContext(t)
	putRegistry(t, cli, "a", "1.0.0")
	var out event.Value[Releases]
	st := etcdStore(t, cli)
	tr := newTracker(rel(t, "1.0.0"), rel(t, "1.0.0"), decodeRegistry, &out)
	require.NoError(t, tr.list(ctx, st))
	stale := tr.rev

	putRegistry(t, cli, "b", "0.9.0")
	rev := putRegistry(t, cli, "c", "1.3.0")
	_, err := cli.Compact(ctx, rev)
	require.NoError(t, err)

	tr.rev = stale
	err = tr.watch(ctx, logr.Discard(), st)
	require.ErrorIs(t, err, rpctypes.ErrCompacted)

	// run lists again after a failed watch; here it starts from a list.
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- tr.run(rctx, st, nil) }()
	eventually(t, func() bool {
		r, ok := out.Load()
		return ok && r.Nodes == 3 && r.Min == rel(t, "0.9.0") && r.Max == rel(t, "1.3.0") && r.Revision >= rev
	}, "relisted summary")
	require.Equal(t, []Node{{ID: "b", Release: rel(t, "0.9.0")}}, tr.blockingNodes())
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

// Pages of the initial listing are read at one revision.
func TestTrackerListPages(t *testing.T) {
	_, cli := etcdClient(t)
	ctx := testContext(t)
	n := listPageSize*2 + 7
	for i := 0; i < n; i++ {
		putRegistry(t, cli, "n"+strconv.Itoa(i), "1.0.0")
	}
	var out event.Value[Releases]
	tr := newTracker(rel(t, "1.0.0"), rel(t, "1.0.0"), decodeRegistry, &out)
	require.NoError(t, tr.list(ctx, etcdStore(t, cli)))
	tr.publish()
	r, _ := out.Load()
	require.Equal(t, n, r.Nodes)
}
