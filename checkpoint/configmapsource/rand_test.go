package configmapsource_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/configmapsource"
	"github.com/reconkit/reconkit/kubefake"
)

// Config.Rand is the source of Watch's retry waits and of each watch's
// timeout: with a source that always draws 0.25, watches that fail at
// once are retried after 90ms, 135ms, 202.5ms (Retry's 100ms growing by
// half, spread by ±20%), each asking for a timeout of WatchTimeout plus
// a quarter of its tenth.
func TestConfigRandDrawsTheWaitsAndTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		cs := kubefake.NewClientset(&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent"},
			Data:       map[string]string{"config": "level=4"},
		})
		start := time.Now()
		var mu sync.Mutex
		var at []time.Duration
		var timeouts []int64
		cs.PrependWatchReactor("configmaps", func(a k8stesting.Action) (bool, watch.Interface, error) {
			mu.Lock()
			defer mu.Unlock()
			at = append(at, time.Since(start))
			if len(at) == 4 {
				cancel()
			}
			return true, nil, apierrors.NewInternalError(errors.New("etcd unavailable"))
		})
		client := timeoutsOf{Interface: cs, timeouts: func(secs int64) {
			mu.Lock()
			defer mu.Unlock()
			timeouts = append(timeouts, secs)
		}}
		src, err := configmapsource.New(configmapsource.Config{Client: client, Namespace: "kube-system", Name: "agent", Key: "config",
			WatchTimeout: 100 * time.Second, Rand: func() float64 { return 0.25 }})
		require.NoError(t, err)
		require.NoError(t, src.Watch(ctx, func(context.Context, []byte, checkpoint.Source) {}))
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, []time.Duration{0, 90 * time.Millisecond, 225 * time.Millisecond, 427500 * time.Microsecond}, at)
		require.Equal(t, []int64{102, 102, 102, 102}, timeouts)
	})
}

// timeoutsOf is a client that reports the timeout of every ConfigMap watch.
type timeoutsOf struct {
	kubernetes.Interface
	timeouts func(secs int64)
}

func (c timeoutsOf) CoreV1() typedcorev1.CoreV1Interface {
	return coreTimeouts{CoreV1Interface: c.Interface.CoreV1(), timeouts: c.timeouts}
}

type coreTimeouts struct {
	typedcorev1.CoreV1Interface
	timeouts func(secs int64)
}

func (c coreTimeouts) ConfigMaps(ns string) typedcorev1.ConfigMapInterface {
	return cmTimeouts{ConfigMapInterface: c.CoreV1Interface.ConfigMaps(ns), timeouts: c.timeouts}
}

type cmTimeouts struct {
	typedcorev1.ConfigMapInterface
	timeouts func(secs int64)
}

func (c cmTimeouts) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if opts.TimeoutSeconds != nil {
		c.timeouts(*opts.TimeoutSeconds)
	}
	return c.ConfigMapInterface.Watch(ctx, opts)
}
