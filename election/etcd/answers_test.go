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
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/etcd"
	"github.com/reconkit/reconkit/internal/etcdfault"
	"github.com/reconkit/reconkit/internal/testenv"
)

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

// agent is one candidate on a client of its own (etcdfault.Agent) whose
// requests are counted by kind: every unary request on the wire, each
// retry of the etcd client's own included, by its method; every watch the
// elector asks for; every renewal. The keep-alive and watch streams the
// client library opens on its own, on real time, are counted apart.
type agent struct {
	*etcdfault.Agent
	library atomic.Int64
}

// newAgent builds an agent with mk (etcdfault.New, or a Group's New),
// which gets the agent's Classify.
func newAgent(mk func(etcdfault.Classify) (*etcdfault.Agent, *clientv3.Client)) (*agent, *clientv3.Client) {
	a := &agent{}
	var cli *clientv3.Client
	a.Agent, cli = mk(etcdfault.Classify{
		Unary: func(method string, _ any) string { return method[strings.LastIndex(method, "/")+1:] },
		Stream: func(ctx context.Context, method string) string {
			switch {
			case isRenewal(ctx, method):
				return "LeaseKeepAlive"
			case strings.HasSuffix(method, "/LeaseKeepAlive"), strings.HasSuffix(method, "/Watch"):
				a.library.Add(1)
			}
			return ""
		},
		Watch: func(string) string { return "Watch" },
	})
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
	for i, ans := range etcdfault.Persistent() {
		t.Run(ans.Name, func(t *testing.T) {
			t.Parallel()
			runBudget(t, srv, fmt.Sprintf("/budget-%d", i), ans, 1)
		})
	}
}

func runBudget(t *testing.T, srv *testenv.EtcdCluster, prefix string, ans etcdfault.Answer, maxUnaryRetries uint) []*agent {
	clk := testingclock.NewFakeClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	names := []string{"leader", "waiting-1", "waiting-2"}
	agents := make([]*agent, len(names))
	leading := make(chan string, 16)
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	group := etcdfault.NewGroup(t, clk)
	for i, name := range names {
		a, cli := newAgent(func(c etcdfault.Classify) (*etcdfault.Agent, *clientv3.Client) {
			return group.New(t, srv, ans, maxUnaryRetries, c)
		})
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

	group.Run(ctx, 60*time.Second)
	var late [][]time.Duration
	for i, a := range agents {
		early := etcdfault.Instants(a.Requests(0, 30*time.Second))
		l := etcdfault.Instants(a.Requests(30*time.Second, 60*time.Second))
		byKind := etcdfault.PerKind(a.Requests(0, time.Duration(1<<62)))
		kinds := make([]string, 0, len(byKind))
		for k, n := range byKind {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		}
		library := a.library.Load()
		sort.Strings(kinds)
		t.Logf("%s (%s): %d requests in the first 30 s, %d from 30 s to 60 s (%.2f/s); by kind: %s; streams the client library opened on its own (keep-alive, watch): %d",
			names[i], ans.Name, len(early), len(l), float64(len(l))/30, strings.Join(kinds, ", "), library)
		require.LessOrEqual(t, len(early), 60, "%s: requests in the first 30 s of %s", names[i], ans.Name)
		require.LessOrEqual(t, len(l), 30, "%s: requests from 30 s to 60 s of %s", names[i], ans.Name)
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
		a, cli := newAgent(func(c etcdfault.Classify) (*etcdfault.Agent, *clientv3.Client) {
			return etcdfault.New(t, srv, clk, etcdfault.Answer{Name: "Unavailable", Code: codes.Unavailable}, tc.retries, c)
		})
		a.Arm()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cli.Get(ctx, "/any")
		cancel()
		require.Error(t, err)
		n := len(a.Requests(0, time.Hour))
		t.Logf("MaxUnaryRetries %d: one Get answered Unavailable was sent %d times (%v)", tc.retries, n, err)
		require.GreaterOrEqual(t, n, tc.least)
		require.LessOrEqual(t, n, tc.most)
	}
}
