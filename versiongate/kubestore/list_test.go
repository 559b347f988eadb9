package kubestore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/internal/storecheck"
	"github.com/reconkit/reconkit/versiongate/kubestore"
)

// Listings stay one snapshot while the reaper deletes: records published
// and listed by other stores between the reaper's judgement and its
// delete, and the listings after it, make a history that some order of
// the operations explains.
func TestListAfterReapIsOneSnapshot(t *testing.T) {
	ctx := testCtx(t)
	cs := kubefake.NewClientset()
	rec := storecheck.NewRecorder(nil, storecheck.ValidatedAfterWrite(), storecheck.LostRecordsLinger())
	node := rec.Wrap("node", newStore(t, cs, "snap", nil))
	other := rec.Wrap("other", newStore(t, cs, "snap", nil))
	clk := newFakeClock()
	ocs, oh := wrap(cs)
	late := rec.Wrap("late", newStore(t, cs, "snap", nil))

	_, err := node.PublishRecord(ctx, "n1", []byte("1.0.0"), 10*time.Second)
	require.NoError(t, err)
	// Between the reaper's judgement and its delete of the record,
	// another record is published and a second observer lists both.
	var once sync.Once
	reaped := make(chan struct{})
	oh.set(func(h *hooks) {
		h.beforeDelete = func(name string) error {
			if name != "snap-n1" {
				return nil
			}
			var err error
			once.Do(func() {
				defer close(reaped)
				if _, err = other.PublishRecord(ctx, "n2", []byte("1.0.0"), 10*time.Second); err != nil {
					return
				}
				var rs []versiongate.Record
				if rs, _, err = late.ListRecords(ctx); err == nil && len(rs) != 2 {
					err = fmt.Errorf("listed %v, not n1 and n2", rs)
				}
			})
			return err
		}
	})
	runWatch(t, rec.Wrap("reaper", newStore(t, ocs, "snap", clk)))
	stepUntil(t, clk, reaped, "the reaper's delete")
	require.Eventually(t, func() bool {
		rs, _, err := late.ListRecords(ctx)
		return err == nil && len(rs) == 1 && rs[0].ID == "n2"
	}, time.Minute, 10*time.Millisecond)
	res, path, err := storecheck.Verify(rec.History(), t.TempDir())
	require.NoError(t, err)
	require.Equal(t, porcupine.Ok, res, "history %v; visualization %s", rec.History(), path)
}

// A listing in pages (limit 2) on a real apiserver is one snapshot: a
// record created and one deleted between its pages do not show, every
// page asks for resourceVersion unset (the first) or the continue token
// (the rest), and a continue token that expired (410) starts the listing
// again.
func TestListRecordsPagesAreOneSnapshot(t *testing.T) {
	ctx := testCtx(t)
	cs := clientFor(t, apiServer(t))
	gate := uniqueGate("pages")
	node := newStore(t, cs, gate, nil)
	leases := map[string]versiongate.RecordLease{}
	for i := range 5 {
		id := fmt.Sprintf("n%d", i)
		l, err := node.PublishRecord(ctx, id, []byte("1.0.0"), time.Minute)
		require.NoError(t, err)
		leases[id] = l
	}
	ocs, oh := wrap(cs)
	observer, err := kubestore.New(kubestore.Config{Client: ocs, Namespace: testNamespace, Gate: gate, ListPageSize: 2})
	require.NoError(t, err)

	var pages []metav1.ListOptions
	changed := false
	oh.set(func(h *hooks) {
		h.beforeList = func(opts *metav1.ListOptions) error {
			pages = append(pages, *opts)
			if opts.Continue != "" && !changed {
				changed = true
				if _, err := node.PublishRecord(ctx, "n5", []byte("1.0.0"), time.Minute); err != nil {
					return err
				}
				return node.DeleteRecord(ctx, leases["n0"])
			}
			return nil
		}
	})
	rs, rev, err := observer.ListRecords(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"n0", "n1", "n2", "n3", "n4"}, recordIDs(rs), "the listing is the first page's snapshot")
	require.Len(t, pages, 3, "5 records in pages of 2")
	for i, p := range pages {
		require.Equal(t, int64(2), p.Limit)
		require.Empty(t, p.ResourceVersion, "page %d: resourceVersion unset, never a cache", i)
		require.Equal(t, i > 0, p.Continue != "", "page %d", i)
	}
	var delivered []string
	wctx, cancel := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		_ = observer.WatchRecords(wctx, rev, func(changes []versiongate.Record, _ int64) {
			for _, c := range changes {
				delivered = append(delivered, fmt.Sprintf("%s:%t", c.ID, c.Value != nil))
			}
			if len(delivered) == 2 {
				cancel()
			}
		})
	}()
	await(t, watched, "the watch's two changes")
	require.ElementsMatch(t, []string{"n5:true", "n0:false"}, delivered, "the watch from the listing's revision reports the changes made between its pages")

	pages = nil
	expired := false
	oh.set(func(h *hooks) {
		h.beforeList = func(opts *metav1.ListOptions) error {
			pages = append(pages, *opts)
			if opts.Continue != "" && !expired {
				expired = true
				return apierrors.NewResourceExpired("the continue token is too old")
			}
			return nil
		}
	})
	rs, _, err = observer.ListRecords(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"n1", "n2", "n3", "n4", "n5"}, recordIDs(rs))
	require.Len(t, pages, 2+3, "an expired continue token starts the listing again")
}

func recordIDs(rs []versiongate.Record) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	slices.Sort(ids)
	return ids
}
