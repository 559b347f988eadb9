package kubefake_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/kubefake"
)

// open reports whether the watch's result channel is still open, once
// every goroutine of the bubble has settled; it must have no event ready.
func open(t *testing.T, w watch.Interface) bool {
	t.Helper()
	synctest.Wait()
	select {
	case ev, ok := <-w.ResultChan():
		if ok {
			t.Fatalf("unexpected %s event", ev.Type)
		}
		return false
	default:
		return true
	}
}

// EndWatches ends every client's watches; a client that watches again
// from the last resourceVersion it saw misses nothing.
func TestEndWatchesAndResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := kubefake.Config{}.NewServer()
		a, b := srv.NewClient(), srv.NewClient()
		ctx := context.Background()
		first, err := a.CoreV1().ConfigMaps(ns).Create(ctx, cm("a", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wa, _ := a.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
		wb, _ := b.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
		srv.EndWatches()
		if open(t, wa) || open(t, wb) {
			t.Fatal("a watch outlived EndWatches")
		}
		if _, err := b.CoreV1().ConfigMaps(ns).Create(ctx, cm("b", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		again, err := a.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer again.Stop()
		if ev := nextEvent(t, again); ev.Type != watch.Added || ev.Object.(*corev1.ConfigMap).Name != "b" {
			t.Fatalf("resumed watch: %s, want ADDED b", ev.Type)
		}
	})
}

// With WatchLifetime, a watch ends that long after it began on the
// configured clock, as the apiserver's min-request-timeout ends it.
func TestWatchLifetime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		srv := kubefake.Config{Clock: clk, WatchLifetime: time.Minute}.NewServer()
		cs := srv.NewClient()
		w, err := cs.CoreV1().ConfigMaps(ns).Watch(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		clk.Step(time.Minute - time.Second)
		if !open(t, w) {
			t.Fatal("watch ended before its lifetime")
		}
		clk.Step(time.Second)
		if open(t, w) {
			t.Fatal("watch outlived its lifetime")
		}
		if clk.HasWaiters() {
			t.Fatal("an ended watch left its timer on the clock")
		}
	})
}

// A stopped watch leaves no timer behind.
func TestStoppedWatchStopsItsTimer(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cs := kubefake.Config{Clock: clk, WatchLifetime: time.Minute}.NewClientset()
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !clk.HasWaiters() {
		t.Fatal("no lifetime timer on the clock")
	}
	w.Stop()
	if clk.HasWaiters() {
		t.Fatal("a stopped watch left its timer on the clock")
	}
}
