package kubefake_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/kubefake"
)

// In a synctest bubble, with no clock configured, a request takes the
// configured latency of the bubble's time.
func TestLatencyInABubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := kubefake.Config{Latency: 250 * time.Millisecond}.NewClientset(cm("a", nil))
		start := time.Now()
		if _, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), "a", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != 250*time.Millisecond {
			t.Fatalf("get took %v, want 250ms", took)
		}
	})
}

// On a fake clock, a request completes when the clock has moved past its
// latency, and not before.
func TestLatencyOnAFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		cs := kubefake.Config{Clock: clk, Latency: time.Second}.NewClientset()
		done := make(chan error, 1)
		go func() {
			_, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), cm("a", nil), metav1.CreateOptions{})
			done <- err
		}()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("request completed with no time passed")
		default:
		}
		if _, err := cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("configmaps"), ns, "a"); err == nil {
			t.Fatal("the write happened before its latency passed")
		}
		clk.Step(time.Second)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
