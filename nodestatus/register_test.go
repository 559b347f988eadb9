package nodestatus_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/nodestatus"
)

// A registration the API server refuses in full (a label it forbids, in
// Config.Node) falls
// back to the reduced form, and the refusal is remembered as a status
// patch's is: the full form is sent once, neither as a create again when
// the Node is deleted and registered again, nor as a status patch after
// the reduced create. Before, every registration sent the full create
// first, and the first status write the full patch, each refused again.
func TestRefusedRegistrationNotSentAgain(t *testing.T) {
	cs := kubefake.NewClientset()
	var mu sync.Mutex
	badCreates, badPatches, creates := 0, 0, 0
	refuse := func() error {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "Node"}, "vk-0", field.ErrorList{field.Invalid(field.NewPath("metadata", "labels"), "bad", "not allowed")})
	}
	cs.PrependReactor("create", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		creates++
		if a.(k8stesting.CreateAction).GetObject().(*corev1.Node).Labels["bad"] != "" {
			badCreates++
			return true, nil, refuse()
		}
		return false, nil, nil
	})
	cs.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if !strings.Contains(string(a.(k8stesting.PatchAction).GetPatch()), `"bad":"label"`) {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		badPatches++
		return true, nil, refuse()
	})
	counts := func() (int, int, int) {
		mu.Lock()
		defer mu.Unlock()
		return badCreates, badPatches, creates
	}
	clk := newFakeClock()
	h := &hooks{}
	cfg := fakeConfig(cs, clk, nil)
	cfg.Node.Labels["bad"] = "label"
	cfg.Events, cfg.ReRegister = h, true
	startReady(t, cfg)
	ctx := context.Background()
	got := waitNode(t, cs, "vk-0", func(*corev1.Node) bool { return true }, "registered")
	require.Empty(t, got.Labels["bad"])
	require.Eventually(t, func() bool { return h.sawEvent("Warning " + nodestatus.EventStatusRejected) }, waitFor, time.Millisecond, "the refusal is reported")

	for i := range 2 {
		uid := got.UID
		require.NoError(t, cs.CoreV1().Nodes().Delete(ctx, "vk-0", metav1.DeleteOptions{}))
		stepUntil(t, clk, 10500*time.Millisecond, func() bool {
			n, err := cs.CoreV1().Nodes().Get(ctx, "vk-0", metav1.GetOptions{})
			if err == nil && n.UID != uid {
				got = n
				return true
			}
			return false
		})
		_, _, all := counts()
		require.GreaterOrEqual(t, all, 3+i, "registered again")
	}
	bc, bp, _ := counts()
	require.Equal(t, 1, bc, "full creates refused")
	require.Zero(t, bp, "full status patches refused")
}
