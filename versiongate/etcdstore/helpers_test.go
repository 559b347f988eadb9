package etcdstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/etcdstore"
)

const (
	testStatusKey   = "/test/reconciler/status"
	testNodesPrefix = "/test/nodes/"
	testElection    = "/test/reconciler/leader"
)

func rel(t testing.TB, s string) versiongate.Release {
	t.Helper()
	r, err := versiongate.ParseRelease(s)
	require.NoError(t, err)
	return r
}

func ver(t testing.TB, s string) versiongate.Version {
	t.Helper()
	v, err := versiongate.ParseVersion(s)
	require.NoError(t, err)
	return v
}

// testContext returns a context carrying a logger that writes to t until
// the test's cleanups have run.
func testContext(t testing.TB) context.Context {
	var done atomic.Bool
	t.Cleanup(func() { done.Store(true) }) // registered first, runs last
	log := funcr.New(func(prefix, args string) {
		if !done.Load() {
			t.Logf("%s %s", prefix, args)
		}
	}, funcr.Options{Verbosity: 1})
	return logr.NewContext(context.Background(), log)
}

// testContextQuiet is testContext without the gates' informational logs:
// only errors reach the test log.
func testContextQuiet(t testing.TB) context.Context {
	var done atomic.Bool
	t.Cleanup(func() { done.Store(true) })
	log := funcr.New(func(prefix, args string) {
		if !done.Load() && strings.Contains(args, `"error"`) {
			t.Logf("%s %s", prefix, args)
		}
	}, funcr.Options{})
	return logr.NewContext(context.Background(), log)
}

// testTerm is a term of an election built directly on clientv3/concurrency,
// the way a host adapts its election to Term.
type testTerm struct {
	ctx    context.Context
	cancel context.CancelFunc
	sess   *concurrency.Session
	el     *concurrency.Election
	done   chan struct{}
}

func (t *testTerm) Context() context.Context { return t.ctx }
func (t *testTerm) Token() uint64            { return uint64(t.el.Rev()) }
func (t *testTerm) Identity() string         { return string(t.el.Key()) }
func (t *testTerm) Guard() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(t.el.Key()), "=", t.el.Rev())
}
func (t *testTerm) Resign(ctx context.Context) error {
	t.cancel()
	<-t.done
	err := t.el.Resign(ctx)
	t.sess.Close()
	return err
}

// testCandidate campaigns on an etcd election with a session per term.
type testCandidate struct {
	cli *clientv3.Client
	id  string
	ttl int
}

func (c *testCandidate) Campaign(ctx context.Context) (versiongate.Term, error) {
	ttl := c.ttl
	if ttl == 0 {
		ttl = 5
	}
	sess, err := concurrency.NewSession(c.cli, concurrency.WithTTL(ttl), concurrency.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	el := concurrency.NewElection(sess, testElection)
	if err := el.Campaign(ctx, c.id); err != nil {
		sess.Close()
		return nil, err
	}
	tctx, cancel := context.WithCancel(ctx)
	term := &testTerm{ctx: tctx, cancel: cancel, sess: sess, el: el, done: make(chan struct{})}
	go func() {
		defer close(term.done)
		select {
		case <-sess.Done():
			cancel()
		case <-tctx.Done():
		}
	}()
	return term, nil
}

// registryRecord is a host-owned node record: the seed's case of nodes in a
// registry of which only some roles count.
type registryRecord struct {
	Roles   []string `json:"roles"`
	Release string   `json:"release,omitempty"`
}

func decodeRegistry(_ string, value []byte) (versiongate.Release, bool, error) {
	var r registryRecord
	if err := json.Unmarshal(value, &r); err != nil {
		return versiongate.Release{}, false, err
	}
	controller := false
	for _, role := range r.Roles {
		controller = controller || role == "controller"
	}
	if !controller || r.Release == "" {
		return versiongate.Release{}, false, nil
	}
	rel, err := versiongate.ParseRelease(r.Release)
	return rel, err == nil, err
}

func putRegistry(t testing.TB, cli *clientv3.Client, id, release string, roles ...string) int64 {
	t.Helper()
	if roles == nil {
		roles = []string{"controller"}
	}
	b, err := json.Marshal(registryRecord{Roles: roles, Release: release})
	require.NoError(t, err)
	resp, err := cli.Put(context.Background(), testNodesPrefix+id, string(b))
	require.NoError(t, err)
	return resp.Header.Revision
}

func putStatus(t testing.TB, cli *clientv3.Client, st versiongate.Status) {
	t.Helper()
	b, err := st.Encode()
	require.NoError(t, err)
	_, err = cli.Put(context.Background(), testStatusKey, string(b))
	require.NoError(t, err)
}

// getStatus returns the stored status, its mod revision, and whether it
// exists.
func getStatus(t testing.TB, cli *clientv3.Client) (versiongate.Status, int64, bool) {
	t.Helper()
	resp, err := cli.Get(context.Background(), testStatusKey)
	require.NoError(t, err)
	if len(resp.Kvs) == 0 {
		return versiongate.Status{}, 0, false
	}
	st, err := versiongate.DecodeStatus(resp.Kvs[0].Value)
	require.NoError(t, err)
	return st, resp.Kvs[0].ModRevision, true
}

// reconcileRecorder records reconcile calls.
type reconcileRecorder struct {
	mu     sync.Mutex
	tokens []uint64
	fail   int // fail this many calls first
}

func (r *reconcileRecorder) reconcile(ctx context.Context, l versiongate.Term) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail > 0 {
		r.fail--
		return fmt.Errorf("apiserver not ready")
	}
	r.tokens = append(r.tokens, l.Token())
	return nil
}

func (r *reconcileRecorder) calls() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uint64(nil), r.tokens...)
}

type gateOpts struct {
	id            string
	version       string
	minCompat     string
	minReconciler string
	owned         bool // gate-owned records instead of the registry
	clock         *clocktesting.FakeClock
	rec           *reconcileRecorder
	events        versiongate.EventRecorder
}

func newGate(t testing.TB, cli *clientv3.Client, o gateOpts) (*versiongate.Gate, *testCandidate) {
	t.Helper()
	if o.minCompat == "" {
		o.minCompat = "0.0.0"
	}
	if o.minReconciler == "" {
		o.minReconciler = "0.0.0"
	}
	if o.rec == nil {
		o.rec = &reconcileRecorder{}
	}
	cand := &testCandidate{cli: cli, id: o.id}
	cfg := versiongate.Config{
		Store:                    etcdStore(t, cli),
		NodeID:                   o.id,
		Version:                  ver(t, o.version),
		MinimumReconcilerRelease: rel(t, o.minReconciler),
		MinimumCompatibleRelease: rel(t, o.minCompat),
		Candidate:                cand,
		Reconcile:                o.rec.reconcile,
	}
	if o.clock != nil {
		cfg.Clock = o.clock
	}
	cfg.Events = o.events
	if !o.owned {
		cfg.Decode = decodeRegistry
	}
	g, err := versiongate.New(cfg)
	require.NoError(t, err)
	return g, cand
}

// runGate runs g until the returned stop function is called or the test
// ends; stop returns Run's error.
func runGate(t testing.TB, ctx context.Context, g *versiongate.Gate) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- g.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			err = recv(t, errc, "Run's return")
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// waitReady runs WaitReady in the background; the returned channel gets
// its result.
func waitReady(t testing.TB, ctx context.Context, g *versiongate.Gate) <-chan error {
	ctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() { defer close(done); errc <- g.WaitReady(ctx) }()
	t.Cleanup(func() { cancel(); recv(t, done, "the goroutine's end") })
	return errc
}

// pumpClock steps c by step whenever something waits on it, until the test
// ends: for tests that need simulated time to pass but do not assert on
// individual waits.
func pumpClock(t testing.TB, c *clocktesting.FakeClock, step time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if c.HasWaiters() {
					c.Step(step)
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); recv(t, done, "the goroutine's end") })
}

// stepWhenWaiting waits until something waits on c, then steps it by d.
func stepWhenWaiting(t testing.TB, c *clocktesting.FakeClock, d time.Duration) {
	t.Helper()
	require.Eventually(t, c.HasWaiters, 10*time.Second, time.Millisecond)
	c.Step(d)
}

func etcdClient(t testing.TB) (*testenv.EtcdCluster, *clientv3.Client) {
	t.Helper()
	e := testenv.Etcd(t)
	return e, e.Client(t)
}

// etcdStore is the etcd store at the test keys.
func etcdStore(t testing.TB, cli *clientv3.Client) *etcdstore.Store {
	t.Helper()
	st, err := etcdstore.New(cli, etcdstore.Config{StatusKey: testStatusKey, NodesPrefix: testNodesPrefix})
	require.NoError(t, err)
	return st
}

// waitPhase waits, without polling, until g's phase is p; it fails the
// test with the phase it saw after a generous deadline. (The helpers of
// versiongatetest do the same; this package's own tests cannot import
// it.)
func waitPhase(t testing.TB, g *versiongate.Gate, p versiongate.Phase) {
	t.Helper()
	waitChange(t, fmt.Sprintf("phase %s", p), func() bool { return g.Phase() == p }, g.PhaseChanged, func() string { return string(g.Phase()) })
}

// waitLeading waits, without polling, until g.Leading() is want.
func waitLeading(t testing.TB, g *versiongate.Gate, want bool) {
	t.Helper()
	waitChange(t, fmt.Sprintf("leading=%v", want), func() bool { return g.Leading() == want }, g.LeadingChanged, func() string { return fmt.Sprint(g.Leading()) })
}

func waitChange(t testing.TB, what string, cond func() bool, changed func() <-chan struct{}, state func() string) {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		ch := changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("waiting for %s: still %s after a minute", what, state())
		}
	}
}

func eventually(t testing.TB, cond func() bool, msg string, args ...any) {
	t.Helper()
	require.Eventually(t, cond, 20*time.Second, 5*time.Millisecond, fmt.Sprintf(msg, args...))
}

func nodeIDs(nodes []versiongate.Node) string {
	s := make([]string, len(nodes))
	for i, n := range nodes {
		s[i] = n.String()
	}
	return strings.Join(s, ",")
}

// eventLog records a gate's events as "type reason".
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) Event(eventtype, reason, _ string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, eventtype+" "+reason)
}

func (l *eventLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

// recv returns what ch delivers, failing t after a minute.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	tm := time.NewTimer(time.Minute)
	defer tm.Stop()
	select {
	case v := <-ch:
		return v
	case <-tm.C:
		t.Fatalf("%s did not happen within a minute", what)
		var zero T
		return zero
	}
}
