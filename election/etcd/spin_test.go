package etcd_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/etcd"
	"github.com/reconkit/reconkit/internal/etcdfault"
	"github.com/reconkit/reconkit/internal/testenv"
)

// endingWatcher is a server (or a proxy) that ends every watch at once,
// without an event or an error. Each Watch call is reported on calls.
type endingWatcher struct {
	clientv3.Watcher
	calls chan string
}

func (w *endingWatcher) Watch(ctx context.Context, key string, _ ...clientv3.OpOption) clientv3.WatchChan {
	select {
	case w.calls <- key:
	case <-ctx.Done():
	}
	ch := make(chan clientv3.WatchResponse)
	close(ch)
	return ch
}

// watchesWhile steps clk n times by step and counts the watches the
// elector starts meanwhile. After each step it gives a watch that the step
// made due 50ms to arrive: a watch that came later is counted at the next
// step or not at all, which can only flatter the code under test, never
// fail it.
func watchesWhile(clk *testingclock.FakeClock, calls <-chan string, n int, step time.Duration) int {
	return countWhile(clk, calls, n, step)
}

// countWhile steps clk n times by step and counts the values received on
// calls meanwhile, giving each 50ms after its step, as watchesWhile does.
func countWhile[T any](clk *testingclock.FakeClock, calls <-chan T, n int, step time.Duration) int {
	count := 0
	for range n {
		clk.Step(step)
		select {
		case <-calls:
			count++
		case <-time.After(50 * time.Millisecond):
		}
	}
	return count
}

// spinDeadline bounds, in real time, every wait of the spin tests for
// something the code under test must do, so that a missed step fails with
// a message instead of hanging until the test binary's timeout.
const spinDeadline = 30 * time.Second

// receive returns the next value of ch, failing the test if none comes
// within spinDeadline.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(spinDeadline):
		require.FailNowf(t, "timed out", "waiting %v for %s", spinDeadline, what)
		var zero T
		return zero
	}
}

// endingElector starts an etcd of its own and returns an elector on it,
// on a fake clock of its own, whose every watch ends at once and is
// reported on the returned channel. Nothing is shared with another test.
func endingElector(t *testing.T, id string) (*etcd.Elector, *testingclock.FakeClock, <-chan string) {
	t.Helper()
	return endingElectorOn(t, testenv.Etcd(t), id)
}

// endingElectorOn is endingElector on srv, with the prefix "/spin".
func endingElectorOn(t *testing.T, srv *testenv.EtcdCluster, id string) (*etcd.Elector, *testingclock.FakeClock, <-chan string) {
	t.Helper()
	return endingElectorTTL(t, srv, id, 10*time.Second)
}

// endingElectorTTL is endingElectorOn with a session TTL of ttl.
func endingElectorTTL(t *testing.T, srv *testenv.EtcdCluster, id string, ttl time.Duration) (*etcd.Elector, *testingclock.FakeClock, <-chan string) {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Now())
	cli := testenv.NewEtcdClient(t, srv.Members[0].ClientAddr())
	w := &endingWatcher{Watcher: cli.Watcher, calls: make(chan string)}
	cli.Watcher = w
	e, err := etcd.New(etcd.Config{Client: cli, Prefix: "/spin", Identity: id, SessionTTL: ttl, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	return e, clk, w.calls
}

// A server or proxy that ends every watch at once, with no event and no
// error: neither the candidate key watch nor Observe's watch is re-established
// before its retry interval has passed on the elector's clock. Before, a
// term re-read its key and watched again at once, forever.
func TestEtcdWatchesThatEndAtOnceDoNotSpin(t *testing.T) {
	t.Parallel() // an etcd of its own; waits on TTLs, not the CPU
	t.Run("term key", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		e, clk, calls := endingElector(t, "leader")
		l, err := e.Campaign(ctx)
		require.NoError(t, err)
		receive(t, calls, "the term's first watch, which ends at once")
		start := clk.Now()
		// 20 steps of 10ms: the re-watch waits 500ms of the elector's clock.
		require.Zero(t, watchesWhile(clk, calls, 20, 10*time.Millisecond), "watches re-established within 200ms of fake time")
		// Then it is re-established, though not before 500ms: the timer
		// for it is armed once the term has seen its watch end, which a
		// busy machine may delay past a step, so step until it comes.
		deadline := time.After(spinDeadline)
		for rewatched := false; !rewatched; {
			clk.Step(100 * time.Millisecond)
			select {
			case <-calls:
				rewatched = true
			case <-time.After(50 * time.Millisecond):
			case <-deadline:
				require.FailNow(t, "the term's watch was not re-established")
			}
		}
		require.GreaterOrEqual(t, clk.Since(start), 500*time.Millisecond, "fake time before the watch was re-established")
		require.NoError(t, l.Context().Err(), "the term ended")
		require.NoError(t, l.Resign(ctx))
	})

	t.Run("candidate waiting for its predecessor", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		srv := testenv.Etcd(t)
		admin := srv.Client(t)
		leader := newEtcd(t, testenv.NewEtcdClient(t, srv.Members[0].ClientAddr()), "/spin", "leader", steadyTTL)
		held, err := leader.Campaign(ctx)
		require.NoError(t, err)
		e, clk, calls := endingElectorOn(t, srv, "waiting")
		won := make(chan election.Leadership, 1)
		failed := make(chan error, 1)
		go func() {
			l, err := e.Campaign(ctx)
			if err != nil {
				failed <- err
				return
			}
			won <- l
		}()
		receive(t, calls, "the candidate's first watch of its predecessor's key, which ends at once")
		keys, err := admin.Get(ctx, "/spin/", clientv3.WithPrefix())
		require.NoError(t, err)
		require.Len(t, keys.Kvs, 2, "candidate keys")
		ours := keys.Kvs[1]
		// The watch is re-established after a pause growing from 100ms
		// (about 6 times in the first 2s), never at once.
		n := watchesWhile(clk, calls, 40, 50*time.Millisecond)
		require.LessOrEqual(t, n, 8, "watches within 2s of fake time")
		select {
		case err := <-failed:
			require.FailNow(t, "Campaign gave up its key", "%v", err)
		default:
		}
		// Its key is the one it put first: it kept its place in the queue.
		keys, err = admin.Get(ctx, "/spin/", clientv3.WithPrefix())
		require.NoError(t, err)
		require.Len(t, keys.Kvs, 2, "candidate keys")
		require.Equal(t, ours.Key, keys.Kvs[1].Key, "the waiting candidate's key")
		require.Equal(t, ours.CreateRevision, keys.Kvs[1].CreateRevision, "the waiting candidate's key")
		// Once the leader resigns, the next read after a pause finds no
		// key ahead and the candidate leads on the key it put first.
		require.NoError(t, held.Resign(ctx))
		var l election.Leadership
		for l == nil {
			clk.Step(500 * time.Millisecond)
			select {
			case l = <-won:
			case err := <-failed:
				require.FailNow(t, "Campaign failed", "%v", err)
			case <-calls:
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
				require.FailNow(t, "the candidate did not lead after its predecessor resigned")
			}
		}
		require.Equal(t, string(ours.Key), l.(*etcd.Leadership).Key())
		drained := make(chan struct{})
		defer close(drained)
		go func() {
			for {
				select {
				case <-calls:
				case <-drained:
					return
				}
			}
		}()
		require.NoError(t, l.Resign(ctx))
	})

	t.Run("observe", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		e, clk, calls := endingElector(t, "observer")
		ch := e.Observe(ctx)
		go func() {
			for range ch {
			}
		}()
		receive(t, calls, "Observe's first watch, which ends at once")
		// Observe backs off from 100ms, growing: at most two watches in
		// 200ms of fake time.
		require.LessOrEqual(t, watchesWhile(clk, calls, 20, 10*time.Millisecond), 2, "watches within 200ms of fake time")
	})
}

// failingRenewals is an etcd whose answers to the elector's renewals (see
// isRenewal) fail at once once armed; each attempt is reported on calls.
type failingRenewals struct {
	armed atomic.Bool
	calls chan struct{}
}

func (f *failingRenewals) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if !f.armed.Load() || !isRenewal(ctx, method) {
		return streamer(ctx, desc, cc, method, opts...)
	}
	select {
	case f.calls <- struct{}{}:
	case <-ctx.Done():
	}
	return nil, status.Error(codes.Unavailable, "etcd unavailable")
}

// A leader whose renewals fail at once retries every 500ms of its clock
// (and its term ends at ValidUntil), not at once.
func TestEtcdRenewalFailingAtOnceDoesNotSpin(t *testing.T) {
	t.Parallel() // an etcd of its own; waits on TTLs, not the CPU
	srv := testenv.Etcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clk := testingclock.NewFakeClock(time.Now())
	f := &failingRenewals{calls: make(chan struct{})}
	cli := etcdfault.Client(t, srv.Members[0].ClientAddr(), 0, nil, f.stream)
	e, err := etcd.New(etcd.Config{Client: cli, Prefix: "/spin-renew", Identity: "leader", SessionTTL: 10 * time.Second, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	l, err := e.Campaign(ctx)
	require.NoError(t, err)
	f.armed.Store(true)
	// Step until the first renewal (due after TTL/3) has been tried.
	for first := false; !first; {
		require.NoError(t, ctx.Err(), "no renewal")
		clk.Step(100 * time.Millisecond)
		select {
		case <-f.calls:
			first = true
		case <-time.After(50 * time.Millisecond):
		}
	}
	n := 0
	for range 20 { // 2s in steps of 100ms: retries from 500ms apart, growing
		clk.Step(100 * time.Millisecond)
		select {
		case <-f.calls:
			n++
		case <-time.After(50 * time.Millisecond):
		}
	}
	require.LessOrEqual(t, n, 4, "renewal attempts within 2s of fake time")
	require.NoError(t, l.Resign(ctx))
}

// deadKeepAlives is an etcd that grants leases but whose keepalive streams
// close at once, as when a proxy ends them; each grant is reported on
// grants.
type deadKeepAlives struct {
	clientv3.Lease
	grants chan struct{}
}

func (d *deadKeepAlives) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	select {
	case d.grants <- struct{}{}:
	case <-ctx.Done():
	}
	return d.Lease.Grant(ctx, ttl)
}

func (d *deadKeepAlives) KeepAlive(context.Context, clientv3.LeaseID) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	ch := make(chan *clientv3.LeaseKeepAliveResponse)
	close(ch)
	return ch, nil
}

// A session whose lease is granted but whose keepalives end at once ends
// each term (or campaign) at once; Run grants the next lease only after a
// pause on its clock, so the grants do not spin.
func TestEtcdSessionEndingAtOnceDoesNotSpin(t *testing.T) {
	t.Parallel() // an etcd of its own; waits on TTLs, not the CPU
	srv := testenv.Etcd(t)
	clk := testingclock.NewFakeClock(time.Now())
	cli := testenv.NewEtcdClient(t, srv.Members[0].ClientAddr())
	d := &deadKeepAlives{Lease: cli.Lease, grants: make(chan struct{})}
	cli.Lease = d
	e, err := etcd.New(etcd.Config{Client: cli, Prefix: "/spin-session", Identity: "candidate", SessionTTL: 10 * time.Second, Clock: clk})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- election.Run(ctx, e, func(ctx context.Context, _ election.Leadership) error {
			<-ctx.Done()
			return nil
		}, election.WithRunClock(clk))
	}()
	defer func() {
		cancel() // also ends a grant waiting to be counted
		receive(t, done, "Run's return")
		require.NoError(t, e.Close())
	}()
	receive(t, d.grants, "the first grant")
	// 40 steps of 50ms. A campaign here either fails (the session ended
	// before it won: Run retries after its failure backoff, 100ms ±20%
	// at first) or wins a term that ends at once (Run pauses 100ms, then
	// half as long again after each such term). Which one happens depends
	// on how fast this machine notices the closed keep-alive stream, and a
	// term restarts the failure backoff, so the fastest mix alternates:
	// 80, 100, 80, 150, 80, 225, 80, 338, 80, 506ms, 11 grants in 2s of
	// fake time. A loop without pauses would make one at every step (40),
	// and one that never grew its pause 20.
	n := countWhile(clk, d.grants, 40, 50*time.Millisecond)
	t.Logf("%d grants within 2s of fake time", n)
	require.LessOrEqual(t, n, 11, "lease grants within 2s of fake time")
}

// failingGets is an etcd whose reads fail at once while armed; each failed
// read is reported on calls.
type failingGets struct {
	clientv3.KV
	armed atomic.Bool
	calls chan struct{}
}

func (f *failingGets) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if !f.armed.Load() {
		return f.KV.Get(ctx, key, opts...)
	}
	select {
	case f.calls <- struct{}{}:
	case <-ctx.Done():
	}
	return nil, errors.New("etcdserver: request timed out")
}

// A candidate whose read of the keys ahead fails at once keeps its key and
// its place in the queue, and reads again after a pause on its clock that
// grows from 100ms, never at once; once reads work again it leads on the
// key it put first. Before, a failed read ended the campaign and revoked
// the key.
func TestEtcdCampaignReadFailingAtOnceKeepsKeyAndDoesNotSpin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testenv.Etcd(t)
	admin := srv.Client(t)
	leader := newEtcd(t, testenv.NewEtcdClient(t, srv.Members[0].ClientAddr()), "/spin-read", "leader", steadyTTL)
	held, err := leader.Campaign(ctx)
	require.NoError(t, err)

	clk := testingclock.NewFakeClock(time.Now())
	cli := testenv.NewEtcdClient(t, srv.Members[0].ClientAddr())
	f := &failingGets{KV: cli.KV, calls: make(chan struct{})}
	f.armed.Store(true)
	cli.KV = f
	e, err := etcd.New(etcd.Config{Client: cli, Prefix: "/spin-read", Identity: "waiting", SessionTTL: 10 * time.Second, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	won := make(chan election.Leadership, 1)
	failed := make(chan error, 1)
	go func() {
		l, err := e.Campaign(ctx)
		if err != nil {
			failed <- err
			return
		}
		won <- l
	}()
	receive(t, f.calls, "the candidate's first read of the keys ahead, which fails")
	keys, err := admin.Get(ctx, "/spin-read/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, keys.Kvs, 2, "candidate keys")
	ours := keys.Kvs[1]
	// 40 steps of 50ms: reads back off from 100ms, growing by half, so at
	// most 8 in 2s of fake time even at the shortest jitter.
	n := countWhile(clk, f.calls, 40, 50*time.Millisecond)
	t.Logf("%d failed reads within 2s of fake time", n)
	require.LessOrEqual(t, n, 8, "reads within 2s of fake time")
	select {
	case err := <-failed:
		require.FailNow(t, "Campaign gave up its key on a failed read", "%v", err)
	default:
	}
	keys, err = admin.Get(ctx, "/spin-read/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, keys.Kvs, 2, "candidate keys")
	require.Equal(t, ours.Key, keys.Kvs[1].Key, "the waiting candidate's key")
	require.Equal(t, ours.CreateRevision, keys.Kvs[1].CreateRevision, "the waiting candidate's key")

	// Reads work again and the leader resigns: the candidate leads on the
	// key it put first.
	f.armed.Store(false)
	require.NoError(t, held.Resign(ctx))
	var l election.Leadership
	for l == nil {
		clk.Step(500 * time.Millisecond)
		select {
		case l = <-won:
		case err := <-failed:
			require.FailNow(t, "Campaign failed", "%v", err)
		case <-f.calls: // a read that was failing as the test disarmed it
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			require.FailNow(t, "the candidate did not lead after its predecessor resigned")
		}
	}
	require.Equal(t, string(ours.Key), l.(*etcd.Leadership).Key())
	require.NoError(t, l.Resign(ctx))
}

// A server or proxy that ends every watch of a term at once costs the
// term a read and a watch per pause, and the pause grows by half from
// 500ms up to the session TTL: about 10 watches in the first 30s, 2 in
// the next 30s, where it paid one every 500ms before, 4 requests a second
// for as long as the term lasted. The TTL is long (300s) so that no
// renewal falls due on the fake clock: the test never depends on one
// meeting its deadline in real time.
func TestEtcdTermRewatchBudget(t *testing.T) {
	t.Parallel() // an etcd of its own; waits on the server, not the CPU
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, clk, calls := endingElectorTTL(t, testenv.Etcd(t), "leader", 300*time.Second)
	l, err := e.Campaign(ctx)
	require.NoError(t, err)
	receive(t, calls, "the term's first watch, which ends at once")
	// 30s of fake time in steps of 250ms, then 30s more, counted apart.
	settle := countWhile(clk, calls, 120, 250*time.Millisecond)
	n := countWhile(clk, calls, 120, 250*time.Millisecond)
	t.Logf("%d watches in the first 30s of fake time, %d in the next 30s", settle, n)
	require.NoError(t, l.Context().Err(), "the term ended")
	require.LessOrEqual(t, settle, 12, "watches in the first 30s")
	require.LessOrEqual(t, n, 4, "watches in 30s after 30s of watches ending at once")
	require.NoError(t, l.Resign(ctx))
}
