package fleetsim

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// While SlowReads delays an agent's reads, its writes through the same
// client go on at once: the wait does not hold the client's lock (which
// would also stop simulated time, and the run with it).
func TestSlowReadsLeaveWritesAlone(t *testing.T) {
	var mu sync.Mutex
	var slowestRead, slowestWrite time.Duration
	note := func(v *time.Duration, d time.Duration) {
		mu.Lock()
		*v = max(*v, d)
		mu.Unlock()
	}
	agent := func(ctx context.Context, d Deps) error {
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() {
			for sleepCtx(ctx, time.Second) {
				start := time.Now()
				_, _ = d.Kube.CoreV1().ConfigMaps("default").Get(ctx, "settings", metav1.GetOptions{})
				note(&slowestRead, time.Since(start))
			}
		})
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: d.Name}}
		for sleepCtx(ctx, 2*time.Second) {
			start := time.Now()
			_, _ = d.Kube.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
			_ = d.Kube.CoreV1().ConfigMaps("default").Delete(ctx, d.Name, metav1.DeleteOptions{})
			note(&slowestWrite, time.Since(start))
		}
		return nil
	}
	r := simulate(t, Config{Agent: agent, Duration: 3 * time.Minute, Quiet: time.Minute,
		Nemesis: Nemesis{Every: 20 * time.Second}.Only(SlowReads)})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if slowestRead < 100*time.Millisecond {
		t.Errorf("slowest read took %s, want at least 100ms", slowestRead)
	}
	if slowestWrite != 0 {
		t.Errorf("a write took %s while only reads were slowed, want no time", slowestWrite)
	}
}
