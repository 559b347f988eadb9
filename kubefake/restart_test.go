package kubefake_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/kubefake"
)

// A restart ends every client's watches; a watch from any
// resourceVersion handed out before it, even the newest, gets 410 as
// its event; a List after it gives a resourceVersion to watch from that
// misses nothing.
func TestRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := kubefake.Config{}.NewServer()
		a, b := srv.NewClient(), srv.NewClient()
		ctx := context.Background()
		last, err := a.CoreV1().ConfigMaps(ns).Create(ctx, cm("a", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wa, _ := a.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: last.ResourceVersion})
		wb, _ := b.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: last.ResourceVersion})
		srv.Restart()
		if open(t, wa) || open(t, wb) {
			t.Fatal("a watch outlived the restart")
		}
		old, err := a.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: last.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		expectGone(t, old)
		list, err := b.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			t.Fatalf("list after the restart: %v items, %v; the store must survive", len(list.Items), err)
		}
		fresh, err := a.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer fresh.Stop()
		if _, err := b.CoreV1().ConfigMaps(ns).Create(ctx, cm("b", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if ev := nextEvent(t, fresh); ev.Type != watch.Added || ev.Object.(*corev1.ConfigMap).Name != "b" {
			t.Fatalf("watch after the restart: %s, want ADDED b", ev.Type)
		}
	})
}

// A restart drops the changes the watch cache has not applied yet (the
// new cache lists the store) and resumes a paused cache.
func TestRestartRefreshesTheCache(t *testing.T) {
	srv := kubefake.Config{CacheLag: 5}.NewServer()
	cs := srv.NewClient()
	ctx := context.Background()
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm("a", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.PauseCache()
	srv.Restart()
	got, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil || len(got.Items) != 1 {
		t.Fatalf("cached list after the restart: %d items, %v; want the store's 1", len(got.Items), err)
	}
}

// WatchHistory bounds the history by number, across resources: the
// oldest change kept is the bound's, and a watch from just before it
// still opens.
func TestWatchHistoryBoundsByCount(t *testing.T) {
	cs := kubefake.Config{WatchHistory: 3}.NewClientset()
	ctx := context.Background()
	var rvs []string
	for i := range 5 {
		c, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm(fmt.Sprint("c", i), nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rvs = append(rvs, c.ResourceVersion)
	}
	// Changes 2, 3 and 4 are kept: a watch from 1 sees them all.
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rvs[1]})
	if err != nil {
		t.Fatal(err)
	}
	for i := 2; i < 5; i++ {
		if ev := nextEvent(t, w); ev.Type != watch.Added || ev.Object.(*corev1.ConfigMap).Name != fmt.Sprint("c", i) {
			t.Fatalf("event %d: %s", i, ev.Type)
		}
	}
	w.Stop()
	// A change to another resource pushes change 2 out.
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err = cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rvs[1]})
	if err != nil {
		t.Fatal(err)
	}
	expectGone(t, w)
}

// WatchWindow drops changes older than the window on the clock, however
// few followed them.
func TestWatchWindowBoundsByTime(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cs := kubefake.Config{Clock: clk, WatchWindow: 5 * time.Minute}.NewClientset()
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(ns)
	first, err := cms.Create(ctx, cm("a", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	list, _ := cms.List(ctx, metav1.ListOptions{})
	clk.Step(4 * time.Minute)
	second, err := cms.Create(ctx, cm("b", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute + time.Second) // the first change is now past the window
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: rvBefore(t, first.ResourceVersion)})
	if err != nil {
		t.Fatal(err)
	}
	expectGone(t, w)
	// The second change is within the window: a watch from the list
	// before it opens and delivers it.
	w, err = cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if ev := nextEvent(t, w); ev.Type != watch.Added || ev.Object.(*corev1.ConfigMap).ResourceVersion != second.ResourceVersion {
		t.Fatalf("watch within the window: %s, want ADDED b", ev.Type)
	}
}

func rvBefore(t *testing.T, rv string) string {
	t.Helper()
	return fmt.Sprint(rvOf(t, rv) - 1)
}
