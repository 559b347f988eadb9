package nodestatustest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

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

// TestWaitForNode runs in a synctest bubble: the waiter is parked in its
// watch before the Node is created, so the watch, not a later read, must
// see both changes, and the 5 s rounds and the deadline take no real time.
func TestWaitForNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := fake.NewClientset()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			n, err := nodestatustest.WaitForCondition(ctx, cs, "n", corev1.NodeReady, corev1.ConditionTrue, "Up")
			if err == nil && n.Labels["step"] != "2" {
				err = fmt.Errorf("returned the wrong node: %v", n.Labels)
			}
			done <- err
		}()
		synctest.Wait() // the waiter read nothing and watches
		start := time.Now()
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"step": "1"}}}
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
		_, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		require.NoError(t, err)
		node.Labels["step"] = "2"
		node.Status.Conditions[0].Status, node.Status.Conditions[0].Reason = corev1.ConditionTrue, "Up"
		_, err = cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		require.NoError(t, err)
		require.NoError(t, <-done)
		require.Zero(t, time.Since(start), "seen by the watch, not by a read after a round")

		// On a deadline, the error shows what was last seen.
		short, scancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer scancel()
		_, err = nodestatustest.WaitForCondition(short, cs, "n", corev1.NodeReady, corev1.ConditionFalse, "")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorContains(t, err, "Ready=True(Up)")
	})
}

func TestWaitForPings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := nodestatustest.NewProvider(&corev1.Node{})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := p.WaitForPings(ctx, 2)
			done <- err
		}()
		synctest.Wait() // the waiter is blocked before the pings come
		require.NoError(t, p.Ping(ctx))
		require.NoError(t, p.Ping(ctx))
		require.NoError(t, <-done, "woken by the pings, not by the deadline")

		short, scancel := context.WithTimeout(ctx, time.Second)
		defer scancel()
		n, err := p.WaitForPings(short, 3)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, 2, n)
	})
}
