package kubestore_test

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate/internal/storecheck"
)

// A listing is one snapshot: a record an observer reaps after its LIST is
// still in the listing it returns (the watch from the listing's revision
// reports the deletion). Leaving it out would report, at the LIST's
// revision, a record missing that another listing at a later revision
// still shows, which no order of the operations explains.
func TestListAfterReapIsOneSnapshot(t *testing.T) {
	ctx := testCtx(t)
	cs := kubefake.NewClientset()
	rec := storecheck.NewRecorder(nil, storecheck.ValidatedAfterWrite())
	node := rec.Wrap("node", newStore(t, cs, "snap", nil))
	other := rec.Wrap("other", newStore(t, cs, "snap", nil))
	clk := newFakeClock()
	ocs, oh := wrap(cs)
	reaper := rec.Wrap("reaper", newStore(t, ocs, "snap", clk))
	late := rec.Wrap("late", newStore(t, cs, "snap", nil))

	_, err := node.PublishRecord(ctx, "n1", []byte("1.0.0"), 10*time.Second)
	require.NoError(t, err)
	_, _, err = reaper.ListRecords(ctx)
	require.NoError(t, err)
	clk.Step(12 * time.Second) // the reaper saw no change for TTL + margin
	// Between the reaper's LIST and its delete, another record is
	// published and a second observer lists both.
	done := false
	oh.set(func(h *hooks) {
		h.beforeDelete = func(string) error {
			if done {
				return nil
			}
			done = true
			if _, err := other.PublishRecord(ctx, "n2", []byte("1.0.0"), 10*time.Second); err != nil {
				return err
			}
			rs, _, err := late.ListRecords(ctx)
			if err != nil {
				return err
			}
			require.Len(t, rs, 2)
			return nil
		}
	})
	rs, _, err := reaper.ListRecords(ctx)
	require.NoError(t, err)
	res, path, err := storecheck.Verify(rec.History(), t.TempDir())
	require.NoError(t, err)
	require.Equal(t, porcupine.Ok, res, "history %v; visualization %s", rec.History(), path)
	require.Len(t, rs, 1, "the reaper's listing is its LIST's snapshot: n1, reaped after it")
}
