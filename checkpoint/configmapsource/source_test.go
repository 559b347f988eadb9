package configmapsource_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/configmapsource"
	"github.com/reconkit/reconkit/internal/testenv"
)

type delivery struct {
	payload string
	src     checkpoint.Source
}

// collect runs src.Watch and returns the channel of its deliveries and a
// stop function that waits for Watch to return.
func collect(t *testing.T, src *configmapsource.Source) (<-chan delivery, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan delivery, 100)
	done := make(chan error, 1)
	go func() {
		done <- src.Watch(ctx, func(_ context.Context, p []byte, s checkpoint.Source) { ch <- delivery{string(p), s} })
	}()
	return ch, func() {
		cancel()
		require.NoError(t, <-done)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := configmapsource.New(configmapsource.Config{WatchTimeout: -1})
	require.ErrorContains(t, err, "missing Client")
	require.ErrorContains(t, err, "missing Namespace, Name or Key")
	require.ErrorContains(t, err, "WatchTimeout")
}

// TestWatchFake covers delivery logic on client-go's fake clientset, which
// keeps no resourceVersions and sends no 410: those are covered by
// TestWatchAPIServer.
func TestWatchFake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		cs := fake.NewClientset(&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent", UID: types.UID("3f2a"), ResourceVersion: "41"},
			Data:       map[string]string{"config": "level=4"},
		})
		src, err := configmapsource.New(configmapsource.Config{Client: cs, Namespace: "kube-system", Name: "agent", Key: "config",
			Clock: clocktesting.NewFakeClock(time.Unix(0, 0))})
		require.NoError(t, err)
		ch, stop := collect(t, src)
		defer stop()
		synctest.Wait()
		d := <-ch
		require.Equal(t, "level=4", d.payload)
		require.Equal(t, checkpoint.Source{UID: "3f2a", ResourceVersion: "41", Origin: "configmap kube-system/agent key config"}, d.src)

		cms := cs.CoreV1().ConfigMaps("kube-system")
		cm, err := cms.Get(ctx, "agent", metav1.GetOptions{})
		require.NoError(t, err)
		cm.Data = nil
		cm.BinaryData = map[string][]byte{"config": []byte("level=5")}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		require.NoError(t, err)
		synctest.Wait()
		require.Equal(t, "level=5", (<-ch).payload, "BinaryData is read too")

		cm.BinaryData = map[string][]byte{"other": []byte("x")}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		require.NoError(t, err)
		require.NoError(t, cms.Delete(ctx, "agent", metav1.DeleteOptions{}))
		synctest.Wait()
		require.Empty(t, ch, "a missing key or a deleted ConfigMap delivers nothing")
	})
}

// requestCounter counts list and watch requests to ConfigMaps and, once
// armed, makes every watch ask for resourceVersion 1 until the client
// lists again (the server compacts every second, so 1 is soon gone).
type requestCounter struct {
	lists, watches atomic.Int32
	expireNext     atomic.Bool
	rt             http.RoundTripper
}

func (c *requestCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/configmaps") {
		q := r.URL.Query()
		if q.Get("watch") == "true" {
			c.watches.Add(1)
			if c.expireNext.Load() {
				q.Set("resourceVersion", "1") // long compacted away
				u := *r.URL
				u.RawQuery = q.Encode()
				r = r.Clone(r.Context())
				r.URL = &url.URL{}
				*r.URL = u
			}
		} else {
			c.lists.Add(1)
			c.expireNext.Store(false)
		}
	}
	return c.rt.RoundTrip(r)
}

// TestWatchAPIServer runs the source against a real kube-apiserver: the
// server's UIDs and resourceVersions name the checkpoints, a watch resumes
// from the last version, and a 410 Gone makes it list again without losing
// an update.
func TestWatchAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real kube-apiserver; skipped under -short")
	}
	ctx := context.Background()
	// Without a watch cache for ConfigMaps, watches go to etcd, which
	// the server compacts every second: an old resourceVersion is a 410.
	a := testenv.APIServer(t, "--etcd-compaction-interval=1s", "--watch-cache-sizes=configmaps#0")
	counter := &requestCounter{}
	cfg := rest.CopyConfig(a.Config())
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.rt = rt; return counter })
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	cms := cs.CoreV1().ConfigMaps("default")
	cm, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Data:       map[string]string{"config": "level=4"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	var mu sync.Mutex
	verbs := map[string]int{}
	src, err := configmapsource.New(configmapsource.Config{Client: cs, Namespace: "default", Name: "agent", Key: "config",
		WatchTimeout: 2 * time.Second, // short, so that the test sees watches resumed
		OnRequest:    func(v string) { mu.Lock(); verbs[v]++; mu.Unlock() }})
	require.NoError(t, err)
	ch, stop := collect(t, src)
	defer stop()
	// Generous: only a hung source or server fails these.
	next := func() delivery {
		t.Helper()
		select {
		case d := <-ch:
			return d
		case <-time.After(2 * time.Minute):
			t.Fatal("no delivery within two minutes")
			return delivery{}
		}
	}
	// until skips deliveries of older versions, which a list after a 410
	// repeats.
	until := func(rv string) delivery {
		t.Helper()
		d := next()
		for d.src.ResourceVersion != rv {
			d = next()
		}
		return d
	}
	d := next()
	require.Equal(t, "level=4", d.payload)
	require.Equal(t, string(cm.UID), d.src.UID)
	require.Equal(t, cm.ResourceVersion, d.src.ResourceVersion)

	cm.Data["config"] = "level=6"
	cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	d = until(cm.ResourceVersion)
	require.Equal(t, "level=6", d.payload)

	// The next watch asks for a compacted version: 410, list again.
	lists := counter.lists.Load()
	counter.expireNext.Store(true)
	require.Eventually(t, func() bool { return counter.lists.Load() > lists }, 2*time.Minute, 10*time.Millisecond, "no list after 410")
	d = next() // the list delivers the current state again
	require.Equal(t, "level=6", d.payload)
	cm.Data["config"] = "level=7"
	cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, "level=7", until(cm.ResourceVersion).payload)

	// A metadata-only edit is delivered with the same payload.
	cm.Labels = map[string]string{"touched": "yes"}
	cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, "level=7", until(cm.ResourceVersion).payload)
	mu.Lock()
	t.Logf("requests: %v (transport saw %d lists, %d watches)", verbs, counter.lists.Load(), counter.watches.Load())
	mu.Unlock()
}
