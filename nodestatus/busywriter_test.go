package nodestatus_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/nodestatus/nodestatustest"
)

// A busy honest writer of the Node or of its Lease (another controller's
// label, annotation or condition) whose write lands between the
// controller's read and its write, six times in a row, is progress, not a
// fault: the status patch and the lease renewal go on retrying (re-read at
// once, then with backoff, never given up) and land once the writer
// pauses, within the retry waits' sum, and Run goes on. A bound on
// conflicts that ignores progress would give up here.
func TestBusyHonestWriterIsWaitedOutNotGivenUp(t *testing.T) {
	const interleaved = 6
	for _, tc := range []struct {
		verb, resource string
	}{{"patch", "nodes"}, {"update", "leases"}} {
		t.Run(tc.resource, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := clock.RealClock{} // the bubble's
				srv := kubefake.Config{Clock: clk}.NewServer()
				cl, op := srv.NewClient(), srv.NewClient()
				p := nodestatustest.NewProvider(testNode("vk-0"))
				cfg := bubbleConfig(cl.Clientset, p)
				cfg.RenewJitter = -1
				c := start(t, cfg)
				waitReady(t, c)
				synctest.Wait()

				var mu sync.Mutex
				writes, attempts := 0, 0
				ctx := context.Background()
				cl.PrependReactor(tc.verb, tc.resource, func(k8stesting.Action) (bool, runtime.Object, error) {
					mu.Lock()
					defer mu.Unlock()
					attempts++
					if writes == interleaved {
						return false, nil, nil
					}
					// Another controller's write lands first, read and written
					// honestly through a client of its own.
					writes++
					if tc.resource == "nodes" {
						n, err := op.CoreV1().Nodes().Get(ctx, "vk-0", metav1.GetOptions{})
						require.NoError(t, err)
						n.Labels["example.com/touched"] = strconv.Itoa(writes)
						_, err = op.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
						require.NoError(t, err)
					} else {
						l, err := op.CoordinationV1().Leases("kube-node-lease").Get(ctx, "vk-0", metav1.GetOptions{})
						require.NoError(t, err)
						if l.Annotations == nil {
							l.Annotations = map[string]string{}
						}
						l.Annotations["example.com/touched"] = strconv.Itoa(writes)
						_, err = op.CoordinationV1().Leases("kube-node-lease").Update(ctx, l, metav1.UpdateOptions{})
						require.NoError(t, err)
					}
					return false, nil, nil
				})

				from := clk.Now()
				landed := func() bool {
					if tc.resource == "nodes" {
						n, err := op.CoreV1().Nodes().Get(ctx, "vk-0", metav1.GetOptions{})
						return err == nil && n.Labels["ours"] == "yes"
					}
					l, err := op.CoordinationV1().Leases("kube-node-lease").Get(ctx, "vk-0", metav1.GetOptions{})
					return err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(from)
				}
				if tc.resource == "nodes" {
					p.UpdateStatus(func(n *corev1.Node) { n.Labels["ours"] = "yes" })
				}
				// Looked at every 100 ms of the bubble's time, as a fake clock
				// stepped in 100 ms steps would show it.
				for !landed() && clk.Since(from) < time.Minute {
					pass(100 * time.Millisecond)
				}
				require.True(t, landed(), "landed within a minute")
				mu.Lock()
				w, a := writes, attempts
				mu.Unlock()
				t.Logf("%s: landed %v after the change, behind %d interleaved writes, in %d attempts", tc.resource, clk.Since(from), w, a)
				require.Equal(t, interleaved, w)
				require.Equal(t, interleaved+1, a, "one write per interleaved one, then the one that landed")
				// The renewal is due 10s on; then the retry waits, 5s at most each.
				require.LessOrEqual(t, clk.Since(from), 10*time.Second+interleaved*5*time.Second)
				select {
				case <-c.Done():
					t.Fatalf("Run returned: %v", c.Err())
				default:
				}
			})
		})
	}
}
