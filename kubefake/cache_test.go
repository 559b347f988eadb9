package kubefake_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/reconkit/reconkit/kubefake"
)

// With a lagging cache, a read at resourceVersion "0" sees an older
// object than a linearizable read, and a decision taken on it is refused
// by the resourceVersion precondition: the reason a writer must not
// trust a cached read.
func TestCacheLagServesStaleReads(t *testing.T) {
	srv := kubefake.Config{CacheLag: 1}.NewServer()
	cs := srv.NewClient()
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(ns)
	v1 := cm("a", nil)
	v1.Data = map[string]string{"v": "1"}
	first, err := cms.Create(ctx, v1, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v2 := first.DeepCopy()
	v2.Data["v"] = "2"
	second, err := cms.Update(ctx, v2, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	if got, _ := cms.Get(ctx, "a", metav1.GetOptions{}); got.Data["v"] != "2" {
		t.Fatalf("linearizable get: v=%s, want 2", got.Data["v"])
	}
	stale, err := cms.Get(ctx, "a", metav1.GetOptions{ResourceVersion: "0"})
	if err != nil || stale.Data["v"] != "1" || stale.ResourceVersion != first.ResourceVersion {
		t.Fatalf("cached get: %v %v, want v=1 at %s", stale.Data, err, first.ResourceVersion)
	}
	list, err := cms.List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil || len(list.Items) != 1 || list.Items[0].Data["v"] != "1" || list.ResourceVersion != first.ResourceVersion {
		t.Fatalf("cached list: %+v %v, want one item v=1 at rv %s", list, err, first.ResourceVersion)
	}
	if full, _ := cms.List(ctx, metav1.ListOptions{}); full.Items[0].Data["v"] != "2" || full.ResourceVersion != second.ResourceVersion {
		t.Fatalf("linearizable list: v=%s at %s, want 2 at %s", full.Items[0].Data["v"], full.ResourceVersion, second.ResourceVersion)
	}

	decision := stale.DeepCopy()
	decision.Data["v"] = "3"
	if _, err := cms.Update(ctx, decision, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("update from a cached read: %v, want 409", err)
	}

	// A read not older than the newest write waits for the cache, which
	// then holds it.
	if got, err := cms.Get(ctx, "a", metav1.GetOptions{ResourceVersion: second.ResourceVersion}); err != nil || got.Data["v"] != "2" {
		t.Fatalf("get not older than %s: %v %v", second.ResourceVersion, got.Data, err)
	}
	if got, _ := cms.Get(ctx, "a", metav1.GetOptions{ResourceVersion: "0"}); got.Data["v"] != "2" {
		t.Fatalf("cached get after the cache caught up: v=%s", got.Data["v"])
	}
}

// A deleted object is still in a lagging cache, and a created one not
// yet; objects of other resources do not move a resource's cache.
func TestCacheLagsPerResource(t *testing.T) {
	srv := kubefake.Config{CacheLag: 1}.NewServer(cm("old", nil))
	cs := srv.NewClient()
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(ns)
	if err := cms.Delete(ctx, "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "old", metav1.GetOptions{ResourceVersion: "0"}); err != nil {
		t.Fatalf("a deletion the cache has not applied: %v", err)
	}
	for i := range 3 {
		if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint("s", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cms.Get(ctx, "old", metav1.GetOptions{ResourceVersion: "0"}); err != nil {
		t.Fatalf("writes to secrets moved the configmaps cache: %v", err)
	}
	if _, err := cms.Create(ctx, cm("new", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, _ := cms.List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if len(list.Items) != 0 {
		t.Fatalf("cache one change behind (the delete applied, the create not): %d items, want 0", len(list.Items))
	}
	if _, err := cms.Get(ctx, "new", metav1.GetOptions{ResourceVersion: "0"}); !apierrors.IsNotFound(err) {
		t.Fatalf("a creation the cache has not applied: %v, want 404", err)
	}
}

// A paused cache holds back watches and cached reads until SyncCache,
// then delivers every change, in order.
func TestPausedCacheDelaysWatchesInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := kubefake.Config{}.NewServer()
		cs := srv.NewClient()
		ctx := context.Background()
		cms := cs.CoreV1().ConfigMaps(ns)
		w, err := cms.Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()

		srv.PauseCache()
		var last string
		for i := range 3 {
			c, err := cms.Create(ctx, cm(fmt.Sprint("c", i), nil), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			last = c.ResourceVersion
		}
		synctest.Wait()
		select {
		case ev := <-w.ResultChan():
			t.Fatalf("watch delivered %s while the cache was paused", ev.Type)
		default:
		}
		if _, err := cms.Get(ctx, "c0", metav1.GetOptions{ResourceVersion: "0"}); !apierrors.IsNotFound(err) {
			t.Fatalf("cached get while paused: %v, want 404", err)
		}
		if _, err := cms.Get(ctx, "c0", metav1.GetOptions{}); err != nil {
			t.Fatalf("linearizable get while paused: %v", err)
		}
		_, err = cms.List(ctx, metav1.ListOptions{ResourceVersion: last})
		if !apierrors.IsTimeout(err) || !apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
			t.Fatalf("list not older than %s while paused: %v, want 504 too large resource version", last, err)
		}

		srv.SyncCache()
		for i := range 3 {
			ev := nextEvent(t, w)
			if got := ev.Object.(*corev1.ConfigMap).Name; ev.Type != watch.Added || got != fmt.Sprint("c", i) {
				t.Fatalf("event %d: %s %s, want ADDED c%d", i, ev.Type, got, i)
			}
		}
		if list, err := cms.List(ctx, metav1.ListOptions{ResourceVersion: last}); err != nil || len(list.Items) != 3 {
			t.Fatalf("list after SyncCache: %v", err)
		}
	})
}
