package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/etcd"
	"github.com/reconkit/reconkit/internal/testenv"
)

// deafWatcher is an etcd whose watches start but never deliver an event,
// as a member cut off from the rest of the cluster behaves for a while:
// a term on it does not learn from its watch that its key went.
type deafWatcher struct{ clientv3.Watcher }

func (deafWatcher) Watch(ctx context.Context, _ string, _ ...clientv3.OpOption) clientv3.WatchChan {
	ch := make(chan clientv3.WatchResponse)
	go func() {
		<-ctx.Done()
		close(ch)
	}()
	return ch
}

// deafKeepAlives is an etcd whose session keep-alive streams start but
// never answer, so that a revoked lease does not end the session locally.
type deafKeepAlives struct{ clientv3.Lease }

func (deafKeepAlives) KeepAlive(ctx context.Context, _ clientv3.LeaseID) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	ch := make(chan *clientv3.LeaseKeepAliveResponse)
	go func() {
		<-ctx.Done()
		close(ch)
	}()
	return ch, nil
}

// unawareTerm wins a term on srv for a candidate that cannot notice its
// end: its watches and session keep-alives never answer and its renewals
// wait on a fake clock nobody steps. Whatever another client does to its
// key or lease, the term stays live locally, as it does for a process
// whose watch event is still in flight, until the guard is all that
// stands between it and a write.
func unawareTerm(t *testing.T, srv *testenv.EtcdCluster, prefix string) (*etcd.Elector, *etcd.Leadership) {
	t.Helper()
	cli := testenv.NewEtcdClient(t, srv.Members[0].ClientAddr())
	cli.Watcher = deafWatcher{cli.Watcher}
	cli.Lease = deafKeepAlives{cli.Lease}
	clk := testingclock.NewFakeClock(time.Now())
	e, err := etcd.New(etcd.Config{Client: cli, Prefix: prefix, Identity: "unaware", SessionTTL: 60 * time.Second, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := e.CampaignEtcd(ctx)
	require.NoError(t, err)
	return e, l
}

// A term that is still live locally, but whose candidate key another
// client deleted, whose lease another client revoked, or whose key
// another client put again, writes nothing through Txn or GuardedTxn:
// etcd evaluates the guard in the revision of the write and the commit
// fails with election.ErrNotLeader. The Else branch of the caller's
// transaction does not run either: a guard that failed beside the
// caller's comparisons would run it, a write by a deposed leader.
func TestEtcdGuardRefusesWritesOfATermEndedByAnotherClient(t *testing.T) {
	t.Parallel() // an etcd of its own; waits on the server, not the CPU
	srv := testenv.Etcd(t)
	admin := srv.Client(t)
	for _, tc := range []struct {
		name string
		end  func(ctx context.Context, l *etcd.Leadership) error
	}{
		{"key deleted", func(ctx context.Context, l *etcd.Leadership) error {
			_, err := admin.Delete(ctx, l.Key())
			return err
		}},
		{"lease revoked", func(ctx context.Context, l *etcd.Leadership) error {
			_, err := admin.Revoke(ctx, l.Lease())
			return err
		}},
		{"key put again", func(ctx context.Context, l *etcd.Leadership) error {
			if _, err := admin.Delete(ctx, l.Key()); err != nil {
				return err
			}
			_, err := admin.Put(ctx, l.Key(), l.Identity())
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			prefix := "/guard-ended/" + tc.name
			data := prefix + "-data"
			e, l := unawareTerm(t, srv, prefix)

			// While the term holds, each form of guarded write lands.
			resp, err := l.Txn(ctx).Then(clientv3.OpPut(data, "held")).Commit()
			require.NoError(t, err)
			require.True(t, resp.Succeeded)
			resp, err = l.Txn(ctx).If(clientv3.Compare(clientv3.Value(data), "=", "other")).
				Then(clientv3.OpPut(data, "then")).Else(clientv3.OpPut(data, "else")).Commit()
			require.NoError(t, err)
			require.False(t, resp.Succeeded, "the caller's comparison is false")
			requireValue(t, admin, data, "else")

			require.NoError(t, tc.end(ctx, l))
			require.NoError(t, l.Context().Err(), "the term noticed its end: the test no longer reaches the guard")
			require.True(t, e.Leading(), "the term noticed its end: the test no longer reaches the guard")

			_, err = l.Txn(ctx).Then(clientv3.OpPut(data, "late-then")).Commit()
			require.ErrorIs(t, err, election.ErrNotLeader, "Txn without If")
			_, err = l.Txn(ctx).If(clientv3.Compare(clientv3.Value(data), "=", "other")).
				Then(clientv3.OpPut(data, "late-then")).Else(clientv3.OpPut(data, "late-else")).Commit()
			require.ErrorIs(t, err, election.ErrNotLeader, "Txn with If and Else")
			_, err = l.GuardedTxn(ctx, nil, []clientv3.Op{clientv3.OpPut(data, "late-guarded")}, []clientv3.Op{clientv3.OpPut(data, "late-guarded-else")})
			require.ErrorIs(t, err, election.ErrNotLeader, "GuardedTxn")
			raw, err := admin.Txn(ctx).If(l.Guard()).Then(clientv3.OpPut(data, "late-raw")).Commit()
			require.NoError(t, err)
			require.False(t, raw.Succeeded, "etcd accepted a write under the guard of an ended term")
			requireValue(t, admin, data, "else")
		})
	}
}

// requireValue checks the value of key as etcd has it now.
func requireValue(t *testing.T, cli *clientv3.Client, key, want string) {
	t.Helper()
	resp, err := cli.Get(context.Background(), key)
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1, "key %s", key)
	require.Equal(t, want, string(resp.Kvs[0].Value), "key %s", key)
}
