package storecheck_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/internal/storecheck"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// A history recorded on the in-memory store, then checked against the
// model twice: as the store answered, and with the leader's conditioned
// write going through a defect that ignores the records' revision, so that
// it stands over a record published after the listing it was conditioned
// on, and kept alive after it.
func Example() {
	for _, defect := range []func(versiongate.Store) versiongate.Store{
		func(s versiongate.Store) versiongate.Store { return s },
		storecheck.IgnoreNodesRev,
	} {
		ctx := context.Background()
		s := versiongatetest.NewStore(versiongatetest.StoreConfig{})
		r := storecheck.NewRecorder(nil)
		node, leader := r.Wrap("node", s), r.Wrap("leader", defect(s))
		term := versiongatetest.NewTerm("leader", 1)

		_, rev, _ := leader.ListRecords(ctx)
		lease, _ := node.PublishRecord(ctx, "node-1", []byte("1.0.0"), time.Minute)
		_ = leader.Fence(ctx, term)
		err := leader.WriteStatus(ctx, term, []byte("restricted"), rev)
		fmt.Println("write refused:", errors.Is(err, versiongate.ErrNodesChanged))
		// The record lived throughout: a record may expire unseen, but
		// not come back.
		_, _ = node.KeepAlive(ctx, lease)

		dir, _ := os.MkdirTemp("", "storecheck-example-")
		res, _, verr := storecheck.Verify(r.History(), dir)
		_ = os.RemoveAll(dir)
		fmt.Println("history:", res, verr)
	}
	// Output:
	// write refused: true
	// history: Ok <nil>
	// write refused: false
	// history: Illegal <nil>
}
