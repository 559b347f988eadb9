package versiongate_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// The etcd store passes the store conformance suite on a real etcd, each
// case under a prefix of its own.
func TestEtcdStoreConformance(t *testing.T) {
	e := testenv.Etcd(t)
	cli := e.Client(t)
	var n atomic.Int64
	versiongatetest.RunStoreConformance(t, versiongatetest.StoreHarness{
		New: func(t *testing.T) func() versiongate.Store {
			p := fmt.Sprintf("/conformance/%d", n.Add(1))
			st, err := versiongate.NewEtcdStore(cli, versiongate.EtcdStoreConfig{StatusKey: p + "/status", NodesPrefix: p + "/nodes/"})
			require.NoError(t, err)
			return func() versiongate.Store { return st }
		},
	})
}
