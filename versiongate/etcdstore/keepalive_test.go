package etcdstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/versiongate"
)

// KeepAlive checks that the record is still bound to the lease: a record
// replaced under the same key (by an operator, or a record not bound to
// the lease) is reported lost although the lease itself lives.
func TestKeepAliveReportsRecordNoLongerBound(t *testing.T) {
	_, cli := etcdClient(t)
	ctx := testContext(t)
	st := etcdStore(t, cli)
	l, err := st.PublishRecord(ctx, "rebound", []byte("v"), 10*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.DeleteRecord(context.Background(), l) })
	_, err = st.KeepAlive(ctx, l)
	require.NoError(t, err)
	_, err = cli.Put(ctx, testNodesPrefix+"rebound", "replaced")
	require.NoError(t, err)
	_, err = st.KeepAlive(ctx, l)
	require.ErrorIs(t, err, versiongate.ErrRecordLost)
}
