package etcdstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reconkit/reconkit/versiongate/etcdstore"
)

// pageChangingKV changes the records between the first page of a listing
// and the next: it deletes one record of a later page and creates one.
type pageChangingKV struct {
	clientv3.KV
	raw   *clientv3.Client
	gets  atomic.Int64
	del   string
	added string
}

func (kv *pageChangingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if kv.gets.Add(1) == 2 {
		if _, err := kv.raw.Delete(ctx, kv.del); err != nil {
			return nil, err
		}
		if _, err := kv.raw.Put(ctx, kv.added, "x"); err != nil {
			return nil, err
		}
	}
	return kv.KV.Get(ctx, key, opts...)
}

// A listing of more than one page is read at the revision of its first
// page: records changed while the later pages are read are listed as they
// were, so that the watch from that revision applies the changes exactly
// once.
func TestListRecordsPagesAtOneRevision(t *testing.T) {
	e, raw := etcdClient(t)
	ctx := testContext(t)
	n := etcdstore.ListPageSize*2 + 7
	var ops []clientv3.Op
	for i := 0; i < n; i++ {
		ops = append(ops, clientv3.OpPut(testNodesPrefix+"n"+strconv.Itoa(i), "x"))
		if len(ops) == 100 || i == n-1 {
			_, err := raw.Txn(ctx).Then(ops...).Commit()
			require.NoError(t, err)
			ops = ops[:0]
		}
	}
	cli := e.Client(t)
	// "n99…" sorts after every page's first key; "z" after every record.
	kv := &pageChangingKV{KV: cli.KV, raw: raw, del: testNodesPrefix + "n99", added: testNodesPrefix + "z"}
	cli.KV = kv
	recs, _, err := etcdStore(t, cli).ListRecords(ctx)
	require.NoError(t, err)
	require.Greater(t, kv.gets.Load(), int64(1), "the listing took more than one page")
	ids := map[string]bool{}
	for _, r := range recs {
		ids[r.ID] = true
	}
	require.True(t, ids["n99"], "a record deleted after the first page is listed as it was")
	require.False(t, ids["z"], "a record created after the first page is not listed")
	require.Len(t, recs, n)
}
