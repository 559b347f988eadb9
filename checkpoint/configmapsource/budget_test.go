package configmapsource_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/configmapsource"
	"github.com/reconkit/reconkit/kubefake"
)

// requestTimes records when (on the bubble's clock) each request of one
// client was sent, by verb.
type requestTimes struct {
	spin context.CancelFunc // called at the 1,000th request: a loop that spins never lets the bubble's clock move

	mu sync.Mutex
	at []time.Time
	by []string
}

func recordRequests(cl *kubefake.Client, spin context.CancelFunc) *requestTimes {
	r := &requestTimes{spin: spin}
	cl.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r.add(a.GetVerb())
		return false, nil, nil
	})
	cl.PrependWatchReactor("*", func(k8stesting.Action) (bool, watch.Interface, error) {
		r.add("watch")
		return false, nil, nil
	})
	return r
}

func (r *requestTimes) add(verb string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at = append(r.at, time.Now())
	r.by = append(r.by, verb)
	if len(r.at) == 1000 {
		r.spin()
	}
}

// within returns the offsets from from of the requests sent in [from, to),
// and how many of each verb.
func (r *requestTimes) within(from, to time.Time) ([]time.Duration, map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	verbs := map[string]int{}
	for i, t := range r.at {
		if !t.Before(from) && t.Before(to) {
			out = append(out, t.Sub(from))
			verbs[r.by[i]]++
		}
	}
	return out, verbs
}

// mostWithin returns the most requests in any window of length w; at is
// sorted.
func mostWithin(at []time.Duration, w time.Duration) int {
	most := 0
	for i := range at {
		j := i
		for j < len(at) && at[j]-at[i] < w {
			j++
		}
		most = max(most, j-i)
	}
	return most
}

func agentConfigMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent"},
		Data:       map[string]string{"config": "level=4"},
	}
}

// endsAtOnce is a watch reactor whose every watch ends as it starts, with
// nothing delivered: a proxy that cuts watches, or a server stopping.
func endsAtOnce(k8stesting.Action) (bool, watch.Interface, error) {
	w := watch.NewFake()
	w.Stop()
	return true, w, nil
}

// TestRequestBudgetUnderPersistentAnswers holds the source's request
// budget: once the API server has given the same answer to every request
// for 30 s (or ends every watch at once, or refuses connections), two
// sources that met it together each send at most one request per second
// over every 10 s from 30 s to 90 s, not at the same instants. A 410
// costs one list and one watch from that list, then the same backoff.
func TestRequestBudgetUnderPersistentAnswers(t *testing.T) {
	cms := schema.GroupResource{Resource: "configmaps"}
	every := func(a kubefake.Answer) func(*kubefake.Server, *kubefake.Client) {
		return func(s *kubefake.Server, _ *kubefake.Client) { s.Inject(kubefake.Fault{Answer: a}) }
	}
	for _, tc := range []struct {
		name  string
		fault func(*kubefake.Server, *kubefake.Client)
	}{
		{"410 Gone to every request", every(kubefake.Fail(apierrors.NewResourceExpired("too old resource version")))},
		{"410 Gone to every watch", func(s *kubefake.Server, _ *kubefake.Client) {
			s.Inject(kubefake.Fault{Verb: "watch", Answer: kubefake.Fail(apierrors.NewResourceExpired("too old resource version"))})
		}},
		{"403 Forbidden", every(kubefake.Fail(apierrors.NewForbidden(cms, "agent", errors.New("RBAC: access denied"))))},
		{"404 Not Found", every(kubefake.Fail(apierrors.NewNotFound(cms, "agent")))},
		{"409 Conflict", every(kubefake.Conflict())},
		{"422 Invalid", every(kubefake.Fail(apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "agent",
			field.ErrorList{field.Invalid(field.NewPath("fieldSelector"), "x", "invalid")})))},
		{"429 with Retry-After 0", every(kubefake.TooManyRequests(0))},
		{"429 with Retry-After 1", every(kubefake.TooManyRequests(1))},
		{"500 Internal Error", every(kubefake.InternalError())},
		{"503 Unavailable", every(kubefake.Unavailable())},
		{"a watch that ends at once", func(_ *kubefake.Server, c *kubefake.Client) { c.PrependWatchReactor("configmaps", endsAtOnce) }},
		{"connection refused", func(_ *kubefake.Server, c *kubefake.Client) { c.Cut() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				srv := kubefake.Config{}.NewServer(agentConfigMap())
				var wg sync.WaitGroup
				var logs []*requestTimes
				var clients []*kubefake.Client
				for range 2 {
					cl := srv.NewClient()
					clients = append(clients, cl)
					src, err := configmapsource.New(configmapsource.Config{Client: cl, Namespace: "kube-system", Name: "agent", Key: "config"})
					require.NoError(t, err)
					wg.Go(func() {
						if err := src.Watch(ctx, func(context.Context, []byte, checkpoint.Source) {}); err != nil {
							t.Errorf("Watch: %v", err)
						}
					})
				}
				synctest.Wait() // both listed and watch
				t0 := time.Now()
				for _, cl := range clients {
					tc.fault(srv, cl)
					logs = append(logs, recordRequests(cl, cancel))
				}
				// The adversary meets the sources at their next request:
				// end the watches they hold, as a server restart does.
				srv.EndWatches()
				time.Sleep(90 * time.Second) // the bubble's clock
				cancel()
				wg.Wait()
				var seen [][]time.Duration
				for i, l := range logs {
					all, _ := l.within(t0, t0.Add(90*time.Second))
					late, verbs := l.within(t0.Add(30*time.Second), t0.Add(90*time.Second))
					most := mostWithin(late, 10*time.Second)
					t.Logf("source %d: %d requests in the first 30 s, %d from 30 s to 90 s %v, at most %d in 10 s", i, len(all)-len(late), len(late), verbs, most)
					require.NotEmpty(t, all, "source %d: the adversary was reached", i)
					require.Less(t, len(all), 1000, "source %d: spins", i)
					require.LessOrEqual(t, most, 10, "source %d: more than one request per second over 10 s, 30 s into the fault", i)
					seen = append(seen, late)
				}
				if len(seen[0]) > 1 && len(seen[1]) > 1 {
					require.False(t, slices.Equal(seen[0], seen[1]), "two sources that failed together retry at the same instants: no jitter")
				}
			})
		})
	}
}

// TestRequestsAfterAPIServerRestart: the API server restarts (every watch
// ends, connections are refused for 20 s, then it answers 503 for 10 s
// while it starts, then it serves again, its watch cache beginning after
// the version the source last saw, so the first watch gets 410). Over
// the minute after it serves again, the source sends one list and one
// watch from that list's resourceVersion, as client-go's reflector does,
// and no more, and it comes back within its backoff's cap.
func TestRequestsAfterAPIServerRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		srv := kubefake.Config{}.NewServer(agentConfigMap())
		cl := srv.NewClient()
		src, err := configmapsource.New(configmapsource.Config{Client: cl, Namespace: "kube-system", Name: "agent", Key: "config"})
		require.NoError(t, err)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		wg.Go(func() { _ = src.Watch(ctx, func(context.Context, []byte, checkpoint.Source) {}) })
		synctest.Wait()
		log := recordRequests(cl, cancel)
		t0 := time.Now()
		cl.Cut() // ends the watch, refuses the rest
		time.Sleep(20 * time.Second)
		cl.Heal()
		srv.Inject(kubefake.Fault{Answer: kubefake.Unavailable()})
		time.Sleep(10 * time.Second)
		srv.ClearFaults()
		// The restarted server's watch cache starts at its newest
		// version: the first watch from an older one gets 410.
		srv.Inject(kubefake.Fault{Verb: "watch", Times: 1, Match: func(a k8stesting.Action) bool {
			return a.(k8stesting.WatchActionImpl).WatchRestrictions.ResourceVersion != ""
		}, Answer: kubefake.Fail(apierrors.NewResourceExpired("too old resource version"))})
		up := time.Now()
		time.Sleep(time.Minute)
		down, _ := log.within(t0, up)
		after, verbs := log.within(up, up.Add(time.Minute))
		t.Logf("%d requests while the apiserver was down (30 s), %d in the minute after %v", len(down), len(after), verbs)
		require.LessOrEqual(t, len(down), 20, "requests while down")
		require.Equal(t, map[string]int{"watch": 2, "list": 1}, verbs, "after the restart: the watch that got 410, one list, one watch from it")
		require.LessOrEqual(t, after[0], 36*time.Second, "back within the backoff's cap (30 s, +20%%)")
	})
}
