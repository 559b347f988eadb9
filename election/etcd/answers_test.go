package etcd_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/etcd"
	"github.com/reconkit/reconkit/internal/testenv"
)

// answer is what a faulty etcd (or the network before it) answers every
// request of one agent with, once armed.
type answer struct {
	name string
	code codes.Code // a gRPC status for every request; codes.OK for none
	// watch answers every watch: "ends" closes it at once with no event,
	// "compacted" cancels it with etcd's compaction error.
	watch string
	// refused closes the proxy the agent talks through: every connection
	// attempt is refused.
	refused bool
}

var persistentAnswers = []answer{
	{name: "Unavailable", code: codes.Unavailable},
	{name: "ResourceExhausted", code: codes.ResourceExhausted},
	{name: "PermissionDenied", code: codes.PermissionDenied},
	{name: "Unauthenticated", code: codes.Unauthenticated},
	{name: "DeadlineExceeded", code: codes.DeadlineExceeded},
	{name: "connection refused", refused: true},
	{name: "watch ends at once", watch: "ends"},
	{name: "compacted revision", watch: "compacted"},
}

// agent is one candidate on a client of its own whose requests are
// counted, at the fake clock's time when they are sent, and answered by
// the fault once armed.
type agent struct {
	clk   *testingclock.FakeClock
	ans   answer
	armed atomic.Bool
	proxy *testenv.ProxyServer
	// armedCh closes when the fault is armed; watches counts the
	// goroutines that forward watches from before it.
	armedCh chan struct{}
	watches sync.WaitGroup

	mu       sync.Mutex
	at       []time.Duration // offsets from armedAt of the requests counted
	library  int             // keep-alive and watch streams the client library opened
	armedAt  time.Time
	kinds    map[string]int
	counting bool
}

func (a *agent) record(kind string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.counting {
		return
	}
	a.at = append(a.at, a.clk.Since(a.armedAt))
	a.kinds[kind]++
}

func (a *agent) arm() {
	a.mu.Lock()
	a.armedAt, a.counting, a.kinds = a.clk.Now(), true, map[string]int{}
	a.mu.Unlock()
	a.armed.Store(true)
	close(a.armedCh)
	if a.ans.refused {
		_ = a.proxy.Close() // nothing listens on its port any more
		return
	}
	// Every stream open before (a waiting candidate's watch) ends, as on
	// a server restart, so that every loop meets the answer at once.
	a.proxy.DropConnections()
}

func (a *agent) fault() error {
	if a.armed.Load() && a.ans.code != codes.OK {
		return status.Error(a.ans.code, "injected: "+a.ans.name)
	}
	return nil
}

// isRenewal tells the elector's renewals (one keep-alive each) from the
// keep-alive stream the client library keeps open for the session: the
// library's asks for a leader, the elector's does not.
func isRenewal(ctx context.Context, method string) bool {
	if !strings.HasSuffix(method, "/LeaseKeepAlive") {
		return false
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	return len(md.Get(rpctypes.MetadataRequireLeaderKey)) == 0
}

// interceptedClient is an etcd client of endpoint (host:port) whose
// requests pass unary and stream first; the etcd client's own retries run
// outside them, so they see each request sent on the wire.
// maxUnaryRetries 0 keeps the etcd client's default.
func interceptedClient(t *testing.T, endpoint string, maxUnaryRetries uint, unary grpc.UnaryClientInterceptor, stream grpc.StreamClientInterceptor) *clientv3.Client {
	t.Helper()
	var opts []grpc.DialOption
	if unary != nil {
		opts = append(opts, grpc.WithChainUnaryInterceptor(unary))
	}
	if stream != nil {
		opts = append(opts, grpc.WithChainStreamInterceptor(stream))
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            []string{"http://" + endpoint},
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		MaxUnaryRetries:      maxUnaryRetries,
		Logger:               zap.NewNop(),
		DialOptions:          opts,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// requests returns the offsets of the counted requests within [from, to).
func (a *agent) requests(from, to time.Duration) []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []time.Duration
	for _, d := range a.at {
		if d >= from && d < to {
			out = append(out, d)
		}
	}
	return out
}

// unary counts every unary request sent on the wire, each retry of the
// etcd client's own included (its retry interceptor runs outside this
// one), and answers the fault once armed.
func (a *agent) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	a.record(method[strings.LastIndex(method, "/")+1:])
	if err := a.fault(); err != nil {
		return err
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// stream answers the fault on stream opens. Watches are counted by the
// Watcher (clientv3 multiplexes them on one stream) and renewals by the
// Lease; the keep-alive streams the client library reopens on its own, on
// real time, are counted apart.
func (a *agent) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	switch {
	case isRenewal(ctx, method):
		a.record("LeaseKeepAlive")
	case strings.HasSuffix(method, "/LeaseKeepAlive"), strings.HasSuffix(method, "/Watch"):
		a.mu.Lock()
		a.library++
		a.mu.Unlock()
	}
	if err := a.fault(); err != nil {
		return nil, err
	}
	return streamer(ctx, desc, cc, method, opts...)
}

// countingWatcher counts each watch the elector asks for and answers the
// watch faults.
type countingWatcher struct {
	clientv3.Watcher
	a *agent
}

func (w *countingWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	w.a.record("Watch")
	if w.a.ans.watch == "" {
		return w.Watcher.Watch(ctx, key, opts...)
	}
	out := make(chan clientv3.WatchResponse)
	if w.a.armed.Load() {
		go w.a.answerWatch(ctx, out)
		return out
	}
	// A watch from before the fault meets it once armed: the client
	// library would otherwise resume it on its own.
	in := w.Watcher.Watch(ctx, key, opts...)
	w.a.watches.Add(1)
	go func() {
		defer w.a.watches.Done()
		for {
			select {
			case <-w.a.armedCh:
				w.a.answerWatch(ctx, out)
				return
			case wr, ok := <-in:
				if !ok {
					close(out)
					return
				}
				select {
				case out <- wr:
				case <-w.a.armedCh:
					w.a.answerWatch(ctx, out)
					return
				case <-ctx.Done():
					close(out)
					return
				}
			}
		}
	}()
	return out
}

// answerWatch answers a watch with the fault: it ends it at once, or
// cancels it with etcd's compaction error.
func (a *agent) answerWatch(ctx context.Context, out chan clientv3.WatchResponse) {
	defer close(out)
	if a.ans.watch == "compacted" {
		select {
		case out <- clientv3.WatchResponse{CompactRevision: 1, Canceled: true}:
		case <-ctx.Done():
		}
	}
}

// newAgent builds an agent's client, through a proxy of its own so that
// its connections can be refused. maxUnaryRetries 0 keeps the etcd
// client's default (100 tries, 25 ms apart, for a read answered
// Unavailable).
func newAgent(t *testing.T, srv *testenv.EtcdCluster, clk *testingclock.FakeClock, ans answer, maxUnaryRetries uint) (*agent, *clientv3.Client) {
	t.Helper()
	a := &agent{clk: clk, ans: ans, kinds: map[string]int{}, armedCh: make(chan struct{})}
	t.Cleanup(a.watches.Wait)
	a.proxy = testenv.Proxy(t, srv.Members[0].ClientAddr())
	cli := interceptedClient(t, a.proxy.Addr(), maxUnaryRetries, a.unary, a.stream)
	cli.Watcher = &countingWatcher{Watcher: cli.Watcher, a: a}
	return a, cli
}

// TestEtcdRequestBudgetUnderPersistentAnswers holds the library's request
// budget for election/etcd on a real etcd: three agents run election.Run
// at default timings (TTL 10 s) on one fake clock, one leads and two wait;
// then every request of each is answered the same way for 60 s of fake
// time. From 30 s to 60 s each agent sends at most one request per second
// (30), counting every unary request on the wire (the etcd client's own
// retries included), every watch and every renewal; the two waiting agents
// send at different instants (jitter). Removing a backoff (Run's
// re-campaign, the campaign's re-read, the term's re-watch or renewal
// retry) makes a loop send at every step of the clock, and the count
// fails.
//
// The agents' clients are built as this package's documentation asks
// (MaxUnaryRetries 1, see "Request budget" in doc.go): with the etcd
// client's default a read answered Unavailable is sent 100 times, 25 ms
// apart on real time, whatever the elector's backoff
// (TestEtcdClientRetriesUnavailableReads).
//
// Requests are stamped with the fake clock when sent. The clock is
// stepped 250 ms at a time, with a short real wait between steps; a
// request that a loaded machine sends late is stamped later, which moves
// it from the first 30 s into the counted window at most by a step or
// two. The bound is 30 where the loops send at most about 10, so only a
// loop that lost its backoff exceeds it.
func TestEtcdRequestBudgetUnderPersistentAnswers(t *testing.T) {
	srv := testenv.Etcd(t)
	for i, ans := range persistentAnswers {
		t.Run(ans.name, func(t *testing.T) {
			t.Parallel()
			runBudget(t, srv, fmt.Sprintf("/budget-%d", i), ans, 1)
		})
	}
}

func runBudget(t *testing.T, srv *testenv.EtcdCluster, prefix string, ans answer, maxUnaryRetries uint) []*agent {
	clk := testingclock.NewFakeClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	names := []string{"leader", "waiting-1", "waiting-2"}
	agents := make([]*agent, len(names))
	leading := make(chan string, 16)
	t.Cleanup(func() {
		for _, a := range agents {
			a.armed.Store(false)
		}
		cancel()
		wg.Wait()
	})
	for i, name := range names {
		a, cli := newAgent(t, srv, clk, ans, maxUnaryRetries)
		agents[i] = a
		e, err := etcd.New(etcd.Config{Client: cli, Prefix: prefix, Identity: name, Clock: clk})
		require.NoError(t, err)
		t.Cleanup(func() { _ = e.Close() })
		wg.Go(func() {
			_ = election.Run(ctx, e, func(ctx context.Context, l election.Leadership) error {
				select {
				case leading <- name:
				default:
				}
				<-ctx.Done()
				return nil
			}, election.WithRunClock(clk), election.WithReleaseTimeout(time.Second))
		})
		if i == 0 {
			require.Equal(t, "leader", receive(t, leading, "the first agent's term"))
		}
	}
	// Both others wait behind the leader: their keys are there.
	admin := srv.Client(t)
	require.Eventually(t, func() bool {
		resp, err := admin.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 3
	}, spinDeadline, 10*time.Millisecond, "three candidate keys")

	for _, a := range agents {
		a.arm()
	}
	const step = 250 * time.Millisecond
	for range int(60 * time.Second / step) {
		clk.Step(step)
		// A short real pause lets the loops the step woke send their
		// requests; one sent later is stamped later (see above).
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	var late [][]time.Duration
	for i, a := range agents {
		early, l := a.requests(0, 30*time.Second), a.requests(30*time.Second, 60*time.Second)
		a.mu.Lock()
		kinds := make([]string, 0, len(a.kinds))
		for k, n := range a.kinds {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		}
		library := a.library
		a.mu.Unlock()
		sort.Strings(kinds)
		t.Logf("%s (%s): %d requests in the first 30 s, %d from 30 s to 60 s (%.2f/s); by kind: %s; streams the client library opened on its own (keep-alive, watch): %d",
			names[i], ans.name, len(early), len(l), float64(len(l))/30, strings.Join(kinds, ", "), library)
		require.LessOrEqual(t, len(early), 60, "%s: requests in the first 30 s of %s", names[i], ans.name)
		require.LessOrEqual(t, len(l), 30, "%s: requests from 30 s to 60 s of %s", names[i], ans.name)
		late = append(late, l)
	}
	if len(late[1]) > 1 || len(late[2]) > 1 {
		require.False(t, slices.Equal(late[1], late[2]), "the two waiting agents sent at the same instants: no jitter")
	}
	return agents
}

// TestEtcdClientRetriesUnavailableReads documents what the budget test's
// client setting is for: with the etcd client's default MaxUnaryRetries, a
// read answered Unavailable is sent again and again by the client itself,
// 25 ms apart on real time, before the elector sees the error, so the
// wire sees tens of requests per call of the elector.
func TestEtcdClientRetriesUnavailableReads(t *testing.T) {
	srv := testenv.Etcd(t)
	clk := testingclock.NewFakeClock(time.Now())
	for _, tc := range []struct {
		retries uint
		least   int
		most    int
	}{{0, 20, 100}, {1, 1, 1}} {
		a, cli := newAgent(t, srv, clk, answer{name: "Unavailable", code: codes.Unavailable}, tc.retries)
		a.arm()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cli.Get(ctx, "/any")
		cancel()
		require.Error(t, err)
		n := len(a.requests(0, time.Hour))
		t.Logf("MaxUnaryRetries %d: one Get answered Unavailable was sent %d times (%v)", tc.retries, n, err)
		require.GreaterOrEqual(t, n, tc.least)
		require.LessOrEqual(t, n, tc.most)
	}
}
