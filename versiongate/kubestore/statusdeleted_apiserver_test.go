package kubestore_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// countingTransport counts the requests a client sends, and shows each
// to saw, if set, once counted.
type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int64
	saw  func(*http.Request)
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	if c.saw != nil {
		c.saw(r)
	}
	return c.next.RoundTrip(r)
}

// firstRequest returns a function for countingTransport.saw that closes
// the channel of the first pattern each request matches, once, and the
// channels in the patterns' order. A pattern is a set of strings the
// request's method and URL must all contain.
func firstRequest(patterns ...[]string) (func(*http.Request), []chan struct{}) {
	chans := make([]chan struct{}, len(patterns))
	onces := make([]sync.Once, len(patterns))
	for i := range chans {
		chans[i] = make(chan struct{})
	}
	return func(r *http.Request) {
		req := r.Method + " " + r.URL.String()
	next:
		for i, p := range patterns {
			for _, part := range p {
				if !strings.Contains(req, part) {
					continue next
				}
			}
			onces[i].Do(func() { close(chans[i]) })
			return
		}
	}, chans
}

// TestGateRecreatesDeletedStatus on a real apiserver, whose finalizers
// and deletions are the real ones: the leader finishes the deletion and
// creates the status Lease again, marked, waits while an old node has its
// record, costing no more than its heartbeat's and the reaper's renewals
// and its watches, and writes the status once the old node goes.
func TestGateRecreatesDeletedStatusAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver (internal/testenv); skipped under -short")
	}
	cfg := apiServer(t)
	cs := clientFor(t, cfg)
	gate := uniqueGate("gone")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writeStatus(t, ctx, cs, gate, 3, statusAt(t, "1.0.0", versiongate.Release{Major: 1}))
	seed := newStore(t, cs, gate, nil)
	rec, err := versiongate.EncodeNodeRelease("old", version(t, "1.0.0"))
	require.NoError(t, err)
	oldLease, err := seed.PublishRecord(ctx, "old", rec, 40*time.Second)
	require.NoError(t, err)
	leases := cs.CoordinationV1().Leases(testNamespace)
	require.NoError(t, leases.Delete(ctx, gate+"-status", metav1.DeleteOptions{}))

	var sent atomic.Int64
	// The requests of the gate's start that the waiting may follow: the
	// store lists the records (and the leader sees the old node blocking)
	// before it opens their watch; the reaper, started beside that watch,
	// reads and takes its Lease, then lists and watches the heartbeats;
	// the leader reads the status once its fence has created the Lease
	// again; and the node publishes its heartbeat and record beside all
	// that (seen below as its record Lease). Escaped (URL-encoded) as the
	// client sends them.
	saw, started := firstRequest(
		[]string{"GET ", "watch=true", "role+in+%28record%2Creaper%29"},
		[]string{"GET ", "watch=true", "role%3Dheartbeat"},
		[]string{"GET ", "fieldSelector=metadata.name%3D" + gate + "-status"},
	)
	gcfg := rest.CopyConfig(cfg)
	gcfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, n: &sent, saw: saw} })
	var reconciles atomic.Int64
	var token atomic.Uint64
	token.Store(10)
	g, err := versiongate.New(versiongate.Config{
		Store: newStore(t, clientFor(t, gcfg), gate, nil), NodeID: "n1", Version: version(t, "2.0.0"),
		MinimumCompatibleRelease: versiongate.Release{Major: 2}, RecordTTL: 30 * time.Second,
		Candidate: versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) {
			return versiongatetest.NewTerm("n1", token.Add(1)), nil
		}),
		Reconcile: func(context.Context, versiongate.Term) error { reconciles.Add(1); return nil },
	})
	require.NoError(t, err)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() { defer wg.Done(); _ = g.Run(ctx) }()

	require.Eventually(t, func() bool {
		l, err := leases.Get(ctx, gate+"-status", metav1.GetOptions{})
		return err == nil && l.DeletionTimestamp == nil && l.Annotations[kubestore.AnnotationStatusDeleted] != ""
	}, time.Minute, 20*time.Millisecond, "the leader creates the status Lease again")
	require.Eventually(t, func() bool { return len(g.Blocking()) == 1 }, time.Minute, 20*time.Millisecond, "the leader waits for the old node")
	// The count starts once the start's requests have been sent: the
	// Lease created again and the old node blocking are shown before the
	// record watch opens, the reaper starts, the leader reads the status
	// and the node's own record is published, and on a loaded machine
	// those came after the count started, as if the waiting had cost them.
	require.Eventually(t, func() bool {
		_, err := leases.Get(ctx, gate+"-n1", metav1.GetOptions{})
		return err == nil
	}, time.Minute, 20*time.Millisecond, "the node publishes its record")
	for i, what := range []string{"the record watch", "the reaper's heartbeat watch", "the leader's status read"} {
		select {
		case <-started[i]:
		case <-ctx.Done():
			t.Fatalf("the gate never sent %s", what)
		case <-time.After(time.Minute):
			t.Fatalf("the gate did not send %s within a minute", what)
		}
	}
	before := sent.Load()
	start := time.Now()
	require.Never(t, func() bool { return reconciles.Load() > 0 }, 5*time.Second, 50*time.Millisecond, "a leader reconciled while an old node may serve on the deleted status")
	n, took := sent.Load()-before, time.Since(start)
	t.Logf("the gate sent %d requests in %v while waiting", n, took)
	// 30s records: a renewal per 10s; the reaper Lease's, per 10s; a
	// watch reopened now and then. A loop on the status would send
	// hundreds.
	require.LessOrEqual(t, n, int64(2+3*took/(10*time.Second)+2))

	require.NoError(t, seed.DeleteRecord(ctx, oldLease))
	require.NoError(t, versiongatetest.WaitPhase(ctx, g, versiongate.PhaseDone))
	got, err := seed.ReadStatus(ctx)
	require.NoError(t, err)
	st, err := versiongate.DecodeStatus(got.Value)
	require.NoError(t, err)
	require.Equal(t, versiongate.Release{Major: 2}, st.MinimumCompatibleRelease)
}
