package storecheck_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/internal/storecheck"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// cutByTerm answers a Fence whose context ended with the context's cause,
// as a request the term's context cut reports it (the Kubernetes store's
// GET of the status Lease, when the election ends the term).
type cutByTerm struct{ versiongate.Store }

func (cutByTerm) Fence(ctx context.Context, _ versiongate.Term) error {
	<-ctx.Done()
	return fmt.Errorf("get Lease: %w", context.Cause(ctx))
}

// A call cut by its own context is of unknown outcome, even when its
// error wraps ErrLeadershipLost (the cause a term's context ends with): no
// later term fenced the store, so a refusal would be illegal, and the
// history is accepted (a rolling proof on the real apiserver was rejected
// so, the term's election lost in the middle of its Fence).
func TestCallCutByItsContextIsUnknown(t *testing.T) {
	s := versiongatetest.NewStore(versiongatetest.StoreConfig{})
	r := storecheck.NewRecorder(nil)
	leader := r.Wrap("leader", cutByTerm{s})
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(versiongate.ErrLeadershipLost)
	err := leader.Fence(ctx, versiongatetest.NewTerm("leader", 1))
	require.ErrorIs(t, err, versiongate.ErrLeadershipLost)
	h := r.History()
	require.Len(t, h, 1)
	require.Equal(t, storecheck.Unknown, h[0].Output.Outcome)
	require.Equal(t, porcupine.Ok, verify(t, h))
}
