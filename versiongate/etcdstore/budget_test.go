package etcdstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/election/etcd"
	"github.com/reconkit/reconkit/internal/etcdfault"
	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/etcdstore"
)

// budgetKeys are one case's keys: the store's and the election's.
type budgetKeys struct {
	status, fence, nodes, election string
}

// loopOf names the loop a request belongs to by the keys it is about: the
// node records (publish, the keep-alive's check, listing and watch), the
// status (reads, watch, the leader's writes and fence), the election (the
// elector's reads and watches, the leader's guard check in Fence), and
// the leases (grants, keep-alives and revokes of the record's and of the
// election's, which carry no key: one bucket for both loops).
func (k budgetKeys) loopOf(keys []string) string {
	loop := "leases"
	for _, key := range keys {
		switch {
		case key == k.status || key == k.fence:
			return "status"
		case strings.HasPrefix(key, k.nodes):
			loop = "records"
		case strings.HasPrefix(key, k.election) && loop == "leases":
			loop = "election"
		}
	}
	return loop
}

// requestKeys returns the keys a unary request is about: a range's, and
// every compare's and operation's of a transaction, nested ones too.
func requestKeys(req any) []string {
	switch r := req.(type) {
	case *etcdserverpb.RangeRequest:
		return []string{string(r.Key)}
	case *etcdserverpb.PutRequest:
		return []string{string(r.Key)}
	case *etcdserverpb.DeleteRangeRequest:
		return []string{string(r.Key)}
	case *etcdserverpb.TxnRequest:
		var keys []string
		for _, c := range r.Compare {
			keys = append(keys, string(c.Key))
		}
		for _, op := range append(slices.Clone(r.Success), r.Failure...) {
			switch {
			case op.GetRequestRange() != nil:
				keys = append(keys, requestKeys(op.GetRequestRange())...)
			case op.GetRequestPut() != nil:
				keys = append(keys, requestKeys(op.GetRequestPut())...)
			case op.GetRequestDeleteRange() != nil:
				keys = append(keys, requestKeys(op.GetRequestDeleteRange())...)
			case op.GetRequestTxn() != nil:
				keys = append(keys, requestKeys(op.GetRequestTxn())...)
			}
		}
		return keys
	}
	return nil
}

// budgetClassify counts every unary request on the wire, every watch and
// every keep-alive stream opened (the store's KeepAlive and the elector's
// renewals open one each; so does the session keep-alive of the client
// library, on its own) under its loop.
func (k budgetKeys) classify() etcdfault.Classify {
	return etcdfault.Classify{
		Unary: func(_ string, req any) string { return k.loopOf(requestKeys(req)) },
		Stream: func(_ context.Context, method string) string {
			if strings.HasSuffix(method, "/LeaseKeepAlive") {
				return "leases"
			}
			return ""
		},
		Watch: func(key string) string { return k.loopOf([]string{key}) },
	}
}

// TestEveryLoopOfEtcdNodesKeepsItsBudget holds the library's request
// budget for versiongate on etcdstore, on a real etcd: two nodes run
// versiongate.Run, elected
// by election/etcd, all on one fake clock. One is ready and leads (its
// initial reconcile done); the other, a newer release that needs a newer
// reconciler, campaigns behind it and waits in WaitReady. Then every
// request of each is answered the same way for 90 s of fake time (every
// open stream ended with it). From 30 s to 90 s each loop of each node
// (records: publish, the keep-alive's check, listing and watch; status:
// reads, watch, the leader's fence and writes, the readiness wait's
// watch; election; leases: the record's and the election's grants,
// keep-alives and revokes, one bucket) sends at most one request a second
// (60), counting every unary request on the wire, every watch and every
// keep-alive stream; the two nodes send at different instants (jitter).
//
// Both the record's keep-alives and the election's renewals run on the
// fake clock (Clock and RecordClock), while etcd expires leases on real
// time: the nodes are armed within a few real seconds of their start,
// well inside the 10 s TTLs, and then the fault lets no keep-alive
// through anyway.
//
// Requests are stamped with the fake clock when sent. The clock is
// stepped 250 ms at a time with a short real wait between steps; a
// request that a loaded machine sends late is stamped later, by a step or
// two.
//
// It runs in both configurations of record loss. With the default, Run
// returns an error wrapping ErrRecordLost once the record's validity runs
// out (the host decides what follows), and nothing the gate started may
// keep sending; with RejoinAfterRecordLoss the node publishes again, and
// every loop keeps running under the fault.
func TestEveryLoopOfEtcdNodesKeepsItsBudget(t *testing.T) {
	srv := testenv.Etcd(t)
	for _, rejoin := range []bool{false, true} {
		name := "default"
		if rejoin {
			name = "RejoinAfterRecordLoss"
		}
		t.Run(name, func(t *testing.T) {
			for i, ans := range etcdfault.Persistent() {
				t.Run(ans.Name, func(t *testing.T) {
					t.Parallel()
					runEtcdBudget(t, srv, fmt.Sprintf("/budget-%s-%d", name, i), ans, rejoin)
				})
			}
		})
	}
}

func runEtcdBudget(t *testing.T, srv *testenv.EtcdCluster, prefix string, ans etcdfault.Answer, rejoin bool) {
	keys := budgetKeys{status: prefix + "/status", fence: prefix + "/status.fence", nodes: prefix + "/nodes/", election: prefix + "/leader"}
	clk := testingclock.NewFakeClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var names []string
	var nodes []*etcdfault.Agent
	var runs []chan error
	var published []chan struct{}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	group := etcdfault.NewGroup(t, clk)
	start := func(name, version, minCompat string) *versiongate.Gate {
		// MaxUnaryRetries 1, as election/etcd's documentation asks: with
		// the etcd client's default a read answered Unavailable is resent
		// up to 100 times, 25 ms apart on real time, whatever the
		// library's backoff.
		n, cli := group.New(t, srv, ans, 1, keys.classify())
		names, nodes = append(names, name), append(nodes, n)
		es, err := etcdstore.New(cli, etcdstore.Config{StatusKey: keys.status, NodesPrefix: keys.nodes})
		require.NoError(t, err)
		st := &publishSignal{Store: es, published: make(chan struct{})}
		published = append(published, st.published)
		el, err := etcd.New(etcd.Config{Client: cli, Prefix: keys.election, Identity: name, Clock: clk})
		require.NoError(t, err)
		t.Cleanup(func() { _ = el.Close() })
		g, err := versiongate.New(versiongate.Config{
			Store: st, NodeID: name, Version: ver(t, version),
			MinimumCompatibleRelease: rel(t, minCompat),
			Candidate:                el,
			Reconcile:                func(context.Context, versiongate.Term) error { return nil },
			Clock:                    clk,
			RecordClock:              clk,
			SettleTime:               -1,
			RejoinAfterRecordLoss:    rejoin,
		})
		require.NoError(t, err)
		ran := make(chan error, 1)
		runs = append(runs, ran)
		wg.Go(func() { ran <- g.Run(ctx) })
		return g
	}
	leader := start("leader", "1.4.0", "1.3.0")
	require.NoError(t, leader.WaitReady(ctx))
	waitPhase(t, leader, versiongate.PhaseDone)
	waiting := start("waiting", "1.2.0", "1.2.0")
	wg.Go(func() { _ = waiting.WaitReady(ctx) })
	// The waiting node has published its record, and knows it: a record
	// already on the server whose publish's answer the arming dropped
	// would leave the node retrying its publish, refused as held, for
	// ever, and its Run would not return for a loss.
	select {
	case <-published[1]:
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting node did not publish its record within 20s")
	}
	admin := srv.Client(t)
	rec, err := admin.Get(ctx, keys.nodes, clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.EqualValues(t, 2, rec.Count, "records")
	require.False(t, waiting.Ready(), "the waiting node is not admitted")

	group.Run(ctx, 90*time.Second)
	var late [][]time.Duration
	for i, n := range nodes {
		early := n.Requests(0, 30*time.Second)
		at := etcdfault.Instants(n.Requests(30*time.Second, 90*time.Second))
		perLoop := etcdfault.PerKind(n.Requests(30*time.Second, 90*time.Second))
		t.Logf("%s (%s): %d requests in the first 30 s; from 30 s to 90 s %.2f/s in all; %s",
			names[i], ans.Name, len(early), float64(len(at))/60, etcdfault.Rates(perLoop, 60*time.Second))
		for loop, c := range perLoop {
			require.LessOrEqual(t, c, 60, "%s: loop %q sent %d requests from 30 s to 90 s of %s", names[i], loop, c, ans.Name)
		}
		late = append(late, at)
	}
	// Run returns only for the record's loss, and only without
	// RejoinAfterRecordLoss. With the default, an answer that fails the
	// keep-alives loses the record, and Run must return: a gate that
	// published again instead (rejoining unasked) would keep within the
	// budget, since under a persistent error the publish's own retry never
	// returns, and only this check sees it. A keep-alive that waits for a
	// refused connection holds its loop for the validity left, on the real
	// clock, so the loss may come a few real seconds after the last step.
	// Answers that only end watches let the keep-alives through: the
	// record stays, and Run must not return.
	losesRecord := !rejoin && ans.Watch == ""
	for i, ran := range runs {
		var err error
		returned := true
		if losesRecord {
			select {
			case err = <-ran:
			case <-time.After(30 * time.Second):
				returned = false
			}
		} else {
			select {
			case err = <-ran:
			default:
				returned = false
			}
		}
		if !returned {
			require.False(t, losesRecord, "%s: Run did not return after its record was lost under %s (RejoinAfterRecordLoss unset)", names[i], ans.Name)
			continue
		}
		t.Logf("%s: Run returned: %v", names[i], err)
		require.True(t, losesRecord, "%s: Run returned under %s: %v", names[i], ans.Name, err)
		require.ErrorIs(t, err, versiongate.ErrRecordLost, "%s: Run returned", names[i])
	}
	if len(late[0]) > 1 && len(late[1]) > 1 {
		require.False(t, slices.Equal(late[0], late[1]), "the two nodes sent at the same instants: no jitter")
	}
}

// publishSignal closes published when a PublishRecord of its store
// returned a record.
type publishSignal struct {
	versiongate.Store
	once      sync.Once
	published chan struct{}
}

func (p *publishSignal) PublishRecord(ctx context.Context, id string, value []byte, ttl time.Duration) (versiongate.RecordLease, error) {
	l, err := p.Store.PublishRecord(ctx, id, value, ttl)
	if err == nil {
		p.once.Do(func() { close(p.published) })
	}
	return l, err
}
