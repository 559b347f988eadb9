package kubefake_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/reconkit/reconkit/kubefake"
)

// A client's watches hand over each change its watch delay after the
// write, in order, on the server's clock; another client's watches, with
// no delay, at once.
func TestWatchDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := kubefake.Config{}.NewServer()
		slow, fast := srv.NewClient(), srv.NewClient()
		slow.SetWatchDelay(30 * time.Millisecond)
		ctx := context.Background()
		ws, err := slow.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Stop()
		wf, err := fast.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer wf.Stop()
		begin := time.Now()
		for _, name := range []string{"a", "b"} {
			if _, err := fast.CoreV1().ConfigMaps(ns).Create(ctx, cm(name, nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range []string{"a", "b"} {
			ev := <-wf.ResultChan()
			if got := ev.Object.(*corev1.ConfigMap).Name; ev.Type != watch.Added || got != name || time.Since(begin) != 0 {
				t.Fatalf("undelayed watch: %s %s after %s, want ADDED %s at once", ev.Type, got, time.Since(begin), name)
			}
		}
		for _, name := range []string{"a", "b"} {
			ev := <-ws.ResultChan()
			if got := ev.Object.(*corev1.ConfigMap).Name; ev.Type != watch.Added || got != name || time.Since(begin) != 30*time.Millisecond {
				t.Fatalf("delayed watch: %s %s after %s, want ADDED %s after 30ms", ev.Type, got, time.Since(begin), name)
			}
		}
		// A watch stopped while it waits ends.
		if _, err := fast.CoreV1().ConfigMaps(ns).Create(ctx, cm("c", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		ws.Stop()
		if ev, ok := <-ws.ResultChan(); ok {
			t.Fatalf("stopped watch delivered %s", ev.Type)
		}
	})
}
