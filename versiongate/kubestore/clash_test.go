package kubestore_test

import (
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// Two gates in one namespace can want one Lease name: gate a's records
// b-status and b-reaper are named as gate a-b's status and reaper Lease,
// and gate a's record b.c as gate a-b's heartbeat of c. Whichever comes
// second is refused with an error naming the clash, and neither gate
// writes the other's Lease, however long it runs.
func TestGatesWhoseNamesClashNeverWriteEachOthersLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newFakeWorld(t)
		ctx, cs, leases, clk := w.ctx, w.cs, w.leases, w.clk
		a := newStore(t, cs, "a", clk)
		hcs, h := wrap(cs)
		var reaperReads atomic.Int64
		h.set(func(h *hooks) {
			h.beforeGet = func(name string) error {
				if name == "a-b-reaper" {
					reaperReads.Add(1)
				}
				return nil
			}
		})
		ab := newStore(t, hcs, "a-b", clk)

		// Gate a's records first: a-b's status and reaper names are taken.
		// Short TTLs: gate a runs no reaper, and a Lease of 10s unchanged
		// for 10 minutes is one a-b's reaper would take over as dead.
		for _, id := range []string{"b-status", "b-reaper"} {
			_, err := a.PublishRecord(ctx, id, []byte("1.0.0"), 10*time.Second)
			require.NoError(t, err)
		}
		rvs := func() map[string]string {
			m := map[string]string{}
			for _, n := range []string{"a-b-status", "a-b-reaper"} {
				l, err := leases.Get(ctx, n, metav1.GetOptions{})
				require.NoError(t, err)
				m[n] = l.ResourceVersion
			}
			return m
		}
		before := rvs()

		_, err := ab.ReadStatus(ctx)
		require.ErrorContains(t, err, `is not gate "a-b"'s status Lease`)
		tk := versiongatetest.NewTerm("leader", 1)
		require.ErrorContains(t, ab.Fence(ctx, tk), `is not gate "a-b"'s status Lease`)
		require.ErrorContains(t, ab.WriteStatus(ctx, tk, []byte("2.0.0"), 0), `is not gate "a-b"'s status Lease`)
		// A watch from before the clashing record was created sees it.
		rv, err := strconv.ParseInt(before["a-b-status"], 10, 64)
		require.NoError(t, err)
		err = ab.WatchStatus(ctx, rv-1, func(versiongate.StoredStatus) bool { return false })
		require.ErrorContains(t, err, `is not gate "a-b"'s status Lease`)
		// Gate a-b's reaper finds its Lease's name taken, and never takes
		// it over, however long it waits.
		// It asks again, with a pause that grows to 10s: not in a spin.
		runWatch(t, ab)
		advance(clk, 10*time.Minute)
		require.Equal(t, before, rvs(), "gate a's records are untouched")
		require.LessOrEqual(t, reaperReads.Load(), int64(10*6+5), "reads of the clashing reaper Lease in 10 minutes")
		require.GreaterOrEqual(t, reaperReads.Load(), int64(10*6-5), "reads of the clashing reaper Lease in 10 minutes")
		recs, _, err := a.ListRecords(ctx)
		require.NoError(t, err)
		require.Len(t, recs, 2)

		// Gate a-b's own Leases first: gate a's record of the same name is
		// refused.
		_, err = ab.PublishRecord(ctx, "c", []byte("1.0.0"), time.Hour)
		require.NoError(t, err)
		_, err = a.PublishRecord(ctx, "b-c", []byte("1.0.0"), time.Hour)
		require.ErrorIs(t, err, versiongate.ErrRecordHeld)
		require.ErrorContains(t, err, `is not a record of gate "a"`)
		_, err = a.PublishRecord(ctx, "b.c", []byte("1.0.0"), time.Hour)
		require.ErrorIs(t, err, versiongate.ErrRecordHeld)
		require.ErrorContains(t, err, `is not a record of gate "a"`)
		recs, _, err = ab.ListRecords(ctx)
		require.NoError(t, err)
		require.Equal(t, []versiongate.Record{{ID: "c", Value: []byte("1.0.0")}}, recs)
		// The heartbeats gate a created for the refused records are gone.
		list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: heartbeatSelector("a")})
		require.NoError(t, err)
		var names []string
		for _, l := range list.Items {
			names = append(names, l.Name)
		}
		require.ElementsMatch(t, []string{"a.b-status", "a.b-reaper"}, names)
	})
}
