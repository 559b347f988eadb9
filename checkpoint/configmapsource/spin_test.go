package configmapsource_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

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

// Adversaries that answer every watch at once with nothing: the loop must
// wait between watches, and keep waiting longer, instead of spinning.
// Each run stops after 50 watch requests and checks how much (fake) time
// they took.
func TestWatchEndingAtOnceDoesNotSpin(t *testing.T) {
	for name, answer := range map[string]func(rv string) (watch.Interface, error){
		"closed at once (EOF)": func(string) (watch.Interface, error) {
			w := watch.NewFake()
			w.Stop()
			return w, nil
		},
		"410 at once": func(string) (watch.Interface, error) {
			return nil, apierrors.NewResourceExpired("too old resource version")
		},
		"410 as the first event": func(string) (watch.Interface, error) {
			w := watch.NewRaceFreeFake()
			w.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)
			return w, nil
		},
		"500 at once": func(string) (watch.Interface, error) {
			return nil, apierrors.NewInternalError(errors.New("etcd unavailable"))
		},
		"an error event at once": func(string) (watch.Interface, error) {
			w := watch.NewRaceFreeFake()
			w.Error(&apierrors.NewInternalError(errors.New("etcd unavailable")).ErrStatus)
			return w, nil
		},
		"a bookmark that moves nothing, then closed": func(rv string) (watch.Interface, error) {
			w := watch.NewRaceFreeFake()
			w.Action(watch.Bookmark, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}})
			w.Stop()
			return w, nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				cs := kubefake.NewClientset(&corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent"},
					Data:       map[string]string{"config": "level=4"},
				})
				var watches atomic.Int32
				cs.PrependWatchReactor("configmaps", func(a k8stesting.Action) (bool, watch.Interface, error) {
					if watches.Add(1) == 50 {
						cancel()
					}
					w, err := answer(a.(k8stesting.WatchActionImpl).WatchRestrictions.ResourceVersion)
					return true, w, err
				})
				src, err := configmapsource.New(configmapsource.Config{Client: cs, Namespace: "kube-system", Name: "agent", Key: "config"})
				require.NoError(t, err)
				start := time.Now() // the bubble's fake clock
				err = src.Watch(ctx, func(context.Context, []byte, checkpoint.Source) {})
				require.NoError(t, err)
				took := time.Since(start)
				// With Retry's backoff (100ms growing 1.5x to 30s) 50 watches
				// take about 18 minutes; a spin takes none.
				require.GreaterOrEqual(t, took, 10*time.Minute, "50 watches in %v of fake time", took)
			})
		})
	}
}

// TestListFailingAtOnceDoesNotSpin: a list that fails at once is retried
// with the same growing wait.
func TestListFailingAtOnceDoesNotSpin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		cs := kubefake.NewClientset()
		var lists atomic.Int32
		cs.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
			if lists.Add(1) == 50 {
				cancel()
			}
			return true, nil, apierrors.NewServiceUnavailable("starting")
		})
		src, err := configmapsource.New(configmapsource.Config{Client: cs, Namespace: "kube-system", Name: "agent", Key: "config"})
		require.NoError(t, err)
		start := time.Now() // the bubble's fake clock
		require.NoError(t, src.Watch(ctx, func(context.Context, []byte, checkpoint.Source) {}))
		took := time.Since(start)
		require.GreaterOrEqual(t, took, 10*time.Minute, "50 lists in %v of fake time", took)
	})
}
