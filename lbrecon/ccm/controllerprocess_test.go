package ccm_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
	"github.com/reconkit/reconkit/lbrecon/ccm/ccmtest"
)

// controllerProcess is one cloud-controller-manager: k8s.io/cloud-provider's
// service controller in a process of its own (ccmtest: it has a data race
// of its own), and a Balancer with a fresh reconciler map in this one,
// serving its load-balancer calls under the race detector.
type controllerProcess struct {
	*ccmtest.Controller
}

// startController starts a controller process for term on the apiserver of
// cfg, its Balancer journaling through cs. The test's context is cancelled
// (with the process's output as the cause) if the process exits before it
// is killed.
func startController(t *testing.T, cfg *rest.Config, cs kubernetes.Interface, engine lbrecon.Engine, fence *lbrecon.Fence,
	term uint64, fail context.CancelCauseFunc) *controllerProcess {
	t.Helper()
	b, err := ccm.New(ccm.Config{
		Engine:  engine,
		Mapping: testMapping,
		Token:   func(context.Context) (uint64, error) { return term, nil },
		Admit:   fence.Admit,
		Journal: ccm.NewConfigMapJournal(cs.CoreV1(), ccm.ConfigMapJournalOptions{}),
		Reconciler: lbrecon.Config{PollInterval: 50 * time.Millisecond, MaxPollInterval: 500 * time.Millisecond,
			ListLag: testLag, CallTimeout: 5 * time.Second},
	})
	require.NoError(t, err)
	c, err := ccmtest.Start(t.Context(), ccmtest.Config{REST: cfg, Balancer: b, ClusterName: "test-cluster", Workers: 2})
	require.NoError(t, err)
	go func() {
		<-c.Done()
		if err := c.Err(); err != nil {
			fail(fmt.Errorf("the service controller of term %d: %w", term, err))
		}
	}()
	t.Cleanup(func() {
		require.NoError(t, c.Kill())
		if t.Failed() {
			t.Logf("service controller of term %d, its output's tail:\n%s", term, lastLines(c.Log(), 60))
		}
	})
	return &controllerProcess{c}
}

// kill crashes the controller process (SIGKILL), ends the contexts of
// the calls it had in flight and waits for them to return: what a crashed
// cloud-controller-manager leaves is what its calls had sent.
func (p *controllerProcess) kill(t testing.TB) {
	t.Helper()
	require.NoError(t, p.Kill())
}

func lastLines(s string, n int) string {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			if n--; n < 0 {
				return s[i+1:]
			}
		}
	}
	return s
}
