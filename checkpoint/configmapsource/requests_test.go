package configmapsource_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/configmapsource"
)

// countingClientset is client-go's fake clientset with what the request
// count needs from a server: resourceVersions on writes and lists, and a
// count of requests by verb.
func countingClientset(t *testing.T, counts map[string]int, mu *sync.Mutex) *fake.Clientset {
	t.Helper()
	cs := fake.NewClientset()
	rv := 100
	cs.PrependReactor("*", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		counts[a.GetVerb()]++
		switch a.GetVerb() {
		case "create", "update":
			rv++
			a.(interface{ GetObject() runtime.Object }).GetObject().(*corev1.ConfigMap).ResourceVersion = strconv.Itoa(rv)
		case "list":
			obj, err := cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("configmaps"), "kube-system", "agent")
			list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(rv)}}
			if err == nil {
				list.Items = append(list.Items, *obj.(*corev1.ConfigMap))
			} else if !apierrors.IsNotFound(err) {
				return true, nil, err
			}
			return true, list, nil
		}
		return false, nil, nil
	})
	cs.PrependWatchReactor("configmaps", func(k8stesting.Action) (bool, watch.Interface, error) {
		mu.Lock()
		defer mu.Unlock()
		counts["watch"]++
		return false, nil, nil
	})
	return cs
}

// TestRequestsPerNodePerHour counts, over one simulated hour with four
// changes of the ConfigMap, the requests one node's source makes: a GET
// every 30 s (plus jitter) when polling, against a watch renewed every
// DefaultWatchTimeout. The counts are deterministic, not timings.
//
//	go test -run TestRequestsPerNodePerHour -v ./checkpoint/configmapsource/
func TestRequestsPerNodePerHour(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		clk := clocktesting.NewFakeClock(time.Unix(0, 0))
		var mu sync.Mutex
		pollCounts, watchCounts := map[string]int{}, map[string]int{}
		pollCS, watchCS := countingClientset(t, pollCounts, &mu), countingClientset(t, watchCounts, &mu)
		for _, cs := range []*fake.Clientset{pollCS, watchCS} {
			_, err := cs.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent", UID: "u"},
				Data:       map[string]string{"config": "v0"},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		poll := &checkpoint.PollSource{Clock: clk, Interval: 30 * time.Second, Fetch: func(ctx context.Context) ([]byte, checkpoint.Source, error) {
			cm, err := pollCS.CoreV1().ConfigMaps("kube-system").Get(ctx, "agent", metav1.GetOptions{})
			if err != nil {
				return nil, checkpoint.Source{}, err
			}
			return []byte(cm.Data["config"]), checkpoint.Source{UID: string(cm.UID), ResourceVersion: cm.ResourceVersion}, nil
		}}
		watcher, err := configmapsource.New(configmapsource.Config{Client: watchCS, Namespace: "kube-system", Name: "agent", Key: "config", Clock: clk})
		require.NoError(t, err)
		got := map[string][]string{}
		var wg sync.WaitGroup
		for name, src := range map[string]checkpoint.ConfigSource{"poll": poll, "watch": watcher} {
			wg.Go(func() {
				_ = src.Watch(ctx, func(_ context.Context, p []byte, _ checkpoint.Source) {
					mu.Lock()
					defer mu.Unlock()
					if l := got[name]; len(l) == 0 || l[len(l)-1] != string(p) {
						got[name] = append(l, string(p))
					}
				})
			})
		}
		synctest.Wait()
		mu.Lock()
		pollCounts["get"], watchCounts["list"], watchCounts["watch"] = 0, 0, 0 // count the hour, not the start
		mu.Unlock()
		for sec := 1; sec <= 3600; sec++ {
			clk.Step(time.Second)
			if sec%900 == 600 { // four changes an hour
				for _, cs := range []*fake.Clientset{pollCS, watchCS} {
					cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "agent", metav1.GetOptions{})
					require.NoError(t, err)
					cm.Data["config"] = "v" + strconv.Itoa(sec)
					_, err = cs.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{})
					require.NoError(t, err)
				}
			}
			synctest.Wait()
		}
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		pollReq := pollCounts["get"]
		watchReq := watchCounts["list"] + watchCounts["watch"]
		t.Logf("one node, one hour, 4 changes: polling every 30 s: %d GETs; watch: %d requests (%d lists, %d watches)",
			pollReq, watchReq, watchCounts["list"], watchCounts["watch"])
		t.Logf("at 5,000 nodes: polling %.1f requests/s, watch %.1f requests/s", float64(pollReq)*5000/3600, float64(watchReq)*5000/3600)
		require.Equal(t, got["poll"], got["watch"], "both sources delivered the same payloads")
		require.Len(t, got["watch"], 5)
		require.Less(t, watchReq*10, pollReq, "the watch costs less than a tenth of polling")
	})
}
