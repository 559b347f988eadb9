package configmapsource_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/configmapsource"
)

// TestFakeClientsetUpdatesAssigned runs a Controller on the source over
// client-go's fake clientset, which sets no UID or resourceVersion unless
// the object carries them and never bumps the resourceVersion: every
// update of the ConfigMap is assigned, named by its payload hash.
func TestFakeClientsetUpdatesAssigned(t *testing.T) {
	for _, tc := range []struct {
		name    string
		meta    metav1.ObjectMeta
		firstID string
	}{
		{"no UID or resourceVersion", metav1.ObjectMeta{Namespace: "kube-system", Name: "agent"}, checkpoint.HashID([]byte("4"))},
		{"UID without resourceVersion", metav1.ObjectMeta{Namespace: "kube-system", Name: "agent", UID: "3f2a"}, checkpoint.HashID([]byte("4"))},
		{"resourceVersion never bumped", metav1.ObjectMeta{Namespace: "kube-system", Name: "agent", UID: "3f2a", ResourceVersion: "41"}, "3f2a_41"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				cs := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: tc.meta, Data: map[string]string{"config": "4"}})
				clk := clocktesting.NewFakeClock(time.Unix(0, 0))
				src, err := configmapsource.New(configmapsource.Config{Client: cs, Namespace: "kube-system", Name: "agent", Key: "config", Clock: clk})
				require.NoError(t, err)
				var conds []string
				ctrl, err := checkpoint.New(checkpoint.Config[int]{
					Store:    &checkpoint.MemStore{},
					Parse:    func(b []byte) (int, error) { return strconv.Atoi(string(b)) },
					Validate: func(int) error { return nil },
					Local:    1,
					Source:   src,
					Clock:    clk,
					Conditions: checkpoint.ConditionReporterFunc(func(_, status, reason, msg string) {
						conds = append(conds, fmt.Sprintf("%s %s: %s", status, reason, msg))
					}),
				})
				require.NoError(t, err)
				_, err = ctrl.Bootstrap(ctx)
				require.NoError(t, err)
				runCtx, cancel := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() { done <- ctrl.Run(runCtx) }()
				defer func() {
					cancel()
					require.NoError(t, <-done)
				}()
				synctest.Wait()
				st := ctrl.Status()
				require.Equal(t, 4, st.Config, "first delivery assigned; conditions %q", conds)
				require.Equal(t, tc.firstID, st.ID, "a ConfigMap without a UID and a resourceVersion is named by hash")

				cms := cs.CoreV1().ConfigMaps("kube-system")
				for _, payload := range []string{"5", "6"} {
					cm, err := cms.Get(ctx, "agent", metav1.GetOptions{})
					require.NoError(t, err)
					require.Equal(t, tc.meta.ResourceVersion, cm.ResourceVersion, "the fake bumps no resourceVersion")
					cm.Data["config"] = payload
					_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
					require.NoError(t, err)
					synctest.Wait()
					st = ctrl.Status()
					want, _ := strconv.Atoi(payload)
					require.Equal(t, want, st.Config, "update to %s assigned; conditions %q", payload, conds)
					require.Equal(t, checkpoint.HashID([]byte(payload)), st.ID)
					require.Equal(t, checkpoint.PhaseTrial, st.Phase)
				}
			})
		})
	}
}
