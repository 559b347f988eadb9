package configmapsource_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/configmapsource"
	"github.com/reconkit/reconkit/kubefake"
)

// TestRequestsResumeWhereTheyLeft follows the requests of one run against
// a scripted server: the list is a quorum read (resourceVersion unset);
// the first watch starts from the list's resourceVersion and gets an
// update; the next starts from the update's and gets a bookmark that
// moves it; the next starts from the bookmark's and gets a 410 event; then
// the source lists again, and watches from that list's resourceVersion.
func TestRequestsResumeWhereTheyLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		cs := kubefake.NewClientset(&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent"},
			Data:       map[string]string{"config": "level=4"},
		})
		var (
			mu   sync.Mutex
			reqs []string // "list rv=…" or "watch rv=…"
		)
		cs.PrependReactor("list", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			reqs = append(reqs, "list rv="+a.(k8stesting.ListActionImpl).ListOptions.ResourceVersion)
			mu.Unlock()
			return false, nil, nil // the fake answers
		})
		cs.PrependWatchReactor("configmaps", func(a k8stesting.Action) (bool, watch.Interface, error) {
			mu.Lock()
			defer mu.Unlock()
			reqs = append(reqs, "watch rv="+a.(k8stesting.WatchActionImpl).WatchRestrictions.ResourceVersion)
			w := watch.NewRaceFreeFake()
			switch len(reqs) {
			case 2:
				w.Modify(&corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent", UID: "u", ResourceVersion: "4000"},
					Data:       map[string]string{"config": "level=5"},
				})
				w.Stop()
			case 3:
				w.Action(watch.Bookmark, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "5000"}})
				w.Stop()
			case 4:
				w.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)
			default:
				cancel()
			}
			return true, w, nil
		})
		src, err := configmapsource.New(configmapsource.Config{Client: cs, Namespace: "kube-system", Name: "agent", Key: "config"})
		require.NoError(t, err)
		require.NoError(t, src.Watch(ctx, func(context.Context, []byte, checkpoint.Source) {}))
		mu.Lock()
		got := append([]string(nil), reqs...)
		mu.Unlock()
		list, err := cs.CoreV1().ConfigMaps("kube-system").List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		rv := list.ResourceVersion
		require.Equal(t, []string{"list rv=", "watch rv=" + rv, "watch rv=4000", "watch rv=5000", "list rv=", "watch rv=" + rv}, got)
	})
}
