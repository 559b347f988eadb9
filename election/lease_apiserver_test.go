package election_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/electiontest"
	"github.com/reconkit/reconkit/internal/testenv"
)

// Short durations keep the real-server tests fast. RenewDeadline leaves
// RenewDeadline − 1s − RetryPeriod of slack for a renewal, since renewals
// within one second are invisible to client-go followers (see
// LeaseConfig.RenewDeadline).
const (
	testLeaseDuration = 3 * time.Second
	testRenewDeadline = 2 * time.Second
	testRetryPeriod   = 300 * time.Millisecond
	testNamespace     = "election"
)

var leaseSeq atomic.Int64

// uniqueName returns a Lease name not used before in this test binary.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, leaseSeq.Add(1))
}

func clientset(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}

// apiServer starts a kube-apiserver with the test namespace.
func apiServer(t *testing.T) *testenv.APIServerInstance {
	t.Helper()
	a := testenv.APIServer(t)
	cs := clientset(t, a.Config())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err, "creating the test namespace")
	}
	return a
}

// newLease returns a candidate on Lease name with the short test durations;
// mod may change the configuration.
func newLease(t *testing.T, cfg *rest.Config, name string, mod ...func(*election.LeaseConfig)) *election.LeaseElector {
	t.Helper()
	c := election.LeaseConfig{
		Client:        clientset(t, cfg),
		Namespace:     testNamespace,
		Name:          name,
		LeaseDuration: testLeaseDuration,
		RenewDeadline: testRenewDeadline,
		RetryPeriod:   testRetryPeriod,
	}
	for _, m := range mod {
		m(&c)
	}
	e, err := election.NewLease(c)
	require.NoError(t, err)
	return e
}

// overwriteHolder writes holder into the Lease as another candidate taking
// over would, with a one-second lease duration.
func overwriteHolder(ctx context.Context, cs kubernetes.Interface, name, holder string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := cs.CoordinationV1().Leases(testNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NewMicroTime(time.Now())
		one := int32(1)
		trans := int32(1)
		if l.Spec.LeaseTransitions != nil {
			trans = *l.Spec.LeaseTransitions + 1
		}
		l.Spec = coordinationv1.LeaseSpec{
			HolderIdentity: &holder, LeaseDurationSeconds: &one,
			AcquireTime: &now, RenewTime: &now, LeaseTransitions: &trans,
		}
		_, err = cs.CoordinationV1().Leases(testNamespace).Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
}

func TestLeaseConformance(t *testing.T) {
	a := apiServer(t)
	admin := clientset(t, a.Config())
	electiontest.Run(t, func(t *testing.T) electiontest.Subject {
		name := uniqueName("conformance")
		return electiontest.Subject{
			NewCandidate: func(t *testing.T) election.Elector { return newLease(t, a.Config(), name) },
			KillSession: func(t *testing.T, c election.Elector) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				require.NoError(t, overwriteHolder(ctx, admin, name, "intruder-"+strings.ReplaceAll(c.Identity(), "_", "-")))
			},
			Timeout: 3 * testLeaseDuration,
		}
	})
}
