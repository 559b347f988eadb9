package lbrecon_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// A creation of unknown outcome whose object a listing shows untagged (a
// crash between create and tag) keeps its intent, and its journal entry,
// until the object is adopted (the ack then holds the name) or a listing
// at its horizon shows it: when the adoption's Tag fails, a listing that
// goes backwards and misses the object does not free the name, so it is
// not created a second time.
func TestUntaggedCreationListedOnceKeepsTheIntent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lag = 2 * time.Second
		eng := &staleOnce{Engine: newEngine(lbrecontest.Config{})}
		journal := &sharedJournal{entries: map[string]lbrecon.Intent{}}
		lb := desc(1, 1, 1)
		r := newLB(t, eng, lb, func(c *lbrecon.Config) { c.ListLag, c.Journal = lag, journal })
		isServer := func(o lbrecon.Object) bool { return o.Kind == lbrecon.KindServer }
		servers := func() (n int) {
			for _, o := range eng.Objects() {
				if isServer(o) {
					n++
				}
			}
			return n
		}

		// The server's creation makes it but fails before tagging it:
		// unknown outcome.
		eng.CrashBeforeTag(isServer, 1)
		var before []lbrecon.Object // a listing from before the creation
		for servers() == 0 {
			var err error
			before, err = eng.Engine.List(t.Context(), lbrecon.Query{Tag: owner, Scope: lb.ID})
			require.NoError(t, err)
			_, err = r.ReconcileOnce(t.Context())
			require.NoError(t, err)
			<-time.After(100 * time.Millisecond)
		}
		// A listing shows the server untagged; adopting it fails.
		eng.FailTag(isServer, 1)
		res, err := r.ReconcileOnce(t.Context())
		require.NoError(t, err)
		require.Len(t, res.Plan.Adopt, 1, "%+v", res.Plan)
		require.Equal(t, 1, servers())
		require.True(t, serverEntry(journal), "the server's entry stays while nothing else holds the name: %v", journal.entries)
		// A replica behind the creation misses it.
		eng.mu.Lock()
		eng.stale = before
		eng.mu.Unlock()
		_, err = r.ReconcileOnce(t.Context())
		require.NoError(t, err)
		require.Equal(t, 1, servers(), "created again while its untagged copy was not adopted yet")

		onceUntilConverged(t, r)
		require.Equal(t, 1, servers(), "created twice")
		for _, o := range eng.Objects() {
			require.True(t, o.HasTag(owner), "adopted: %v", o)
		}
		<-time.After(2 * lag)
		onceUntilConverged(t, r)
		require.False(t, serverEntry(journal), "the entry goes once the adoption is confirmed")
	})
}

// serverEntry reports whether j holds a server's entry.
func serverEntry(j *sharedJournal) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.ContainsFunc(slices.Collect(maps.Values(j.entries)), func(in lbrecon.Intent) bool {
		return in.Kind == lbrecon.KindServer
	})
}

// On read replicas (lbrecontest's ReplicaLag, seeded), every server's
// creation crashes before its tag and every first adoption fails, one
// pass every 300 ms for three times the lag: never a duplicate, whatever
// the replicas show, and everything adopted in the end.
func TestUntaggedCreationsOnReplicasNoDuplicates(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := replicaEngine(seed)
				isServer := func(o lbrecon.Object) bool { return o.Kind == lbrecon.KindServer }
				lb := desc(1, 1, 3)
				eng.CrashBeforeTag(isServer, len(lb.Targets))
				eng.FailTag(isServer, len(lb.Targets))
				r := newLB(t, eng, lb, nil)
				for range int(3 * replicaLag / (300 * time.Millisecond)) {
					_, err := r.ReconcileOnce(t.Context())
					require.NoError(t, err)
					require.Zero(t, duplicates(eng), "objects: %v", eng.Objects())
					<-time.After(300 * time.Millisecond)
				}
				onceUntilConverged(t, r)
				<-time.After(replicaLag)
				onceUntilConverged(t, r)
				require.Zero(t, duplicates(eng))
				for _, o := range eng.Objects() {
					require.True(t, o.HasTag(owner), "adopted: %v", o)
				}
			})
		})
	}
}
