package nodestatustest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/nodestatus/nodestatustest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestProvider(t *testing.T) {
	p := nodestatustest.NewProvider(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "1"}}})
	var got []string
	p.NotifyNodeStatus(context.Background(), func(n *corev1.Node) { got = append(got, n.Labels["a"]) })
	p.UpdateStatus(func(n *corev1.Node) { n.Labels["a"] = "2" })
	p.SetStatus(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "3"}}})
	require.Equal(t, []string{"2", "3"}, got)
	require.Equal(t, "3", p.Node().Labels["a"])

	require.NoError(t, p.Ping(context.Background()))
	boom := errors.New("boom")
	p.SetPingError(boom)
	require.ErrorIs(t, p.Ping(context.Background()), boom)

	p.SetPingHang(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, p.Ping(ctx), context.DeadlineExceeded, "a hanging ping returns when its context ends")
	require.Equal(t, 3, p.Pings())
}

func ExampleProvider() {
	p := nodestatustest.NewProvider(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	p.NotifyNodeStatus(context.Background(), func(n *corev1.Node) {
		fmt.Println("notified:", n.Status.Conditions[0].Type, n.Status.Conditions[0].Status)
	})
	p.UpdateStatus(func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue}}
	})
	p.SetPingError(errors.New("backend down"))
	fmt.Println("ping:", p.Ping(context.Background()))
	// Output:
	// notified: MemoryPressure True
	// ping: backend down
}
