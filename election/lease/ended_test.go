package lease

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/kubefake"
)

// A term whose Lease another client deleted, or took over, writes through
// its gate until the term learns of it: the gate judges the term as this
// process knows it (the documented limit). It learns at its next renewal,
// one RetryPeriod later, not at ValidUntil: the renewal's 404, or its
// conflict and the read that finds another holder, end the term as lost,
// and the gate refuses every write from then on.
func TestGateClosesAtTheRenewalThatFindsTheLeaseGone(t *testing.T) {
	for _, tc := range []struct {
		name  string
		end   func(ctx context.Context, cs *fake.Clientset) error
		cause string
	}{
		{"deleted", func(ctx context.Context, cs *fake.Clientset) error {
			return cs.CoordinationV1().Leases("ns").Delete(ctx, "lease", metav1.DeleteOptions{})
		}, "the Lease was deleted"},
		{"taken over", func(ctx context.Context, cs *fake.Clientset) error {
			l, err := cs.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{})
			if err != nil {
				return err
			}
			l.Spec.HolderIdentity = ptr.To("usurper")
			_, err = cs.CoordinationV1().Leases("ns").Update(ctx, l, metav1.UpdateOptions{})
			return err
		}, `held by "usurper"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newArmedClock(epoch)
			f := newFakeLease(t, kubefake.Config{Clock: clk}.NewClientset(), clk)
			closeOnCleanup(t, f)
			ctx, cancel := context.WithTimeout(context.Background(), recvDeadline)
			defer cancel()
			l, err := f.Campaign(ctx)
			require.NoError(t, err)
			cur, ok := f.Current()
			require.True(t, ok, "Current while leading")
			require.Equal(t, l, cur, "Current while leading")
			next := &okTransport{}
			gate := &writeGate{next: next, l: l}
			write := func() error {
				req, err := http.NewRequest(http.MethodPost, "http://apiserver/api/v1/namespaces/ns/configmaps", http.NoBody)
				require.NoError(t, err)
				resp, err := gate.RoundTrip(req)
				if err == nil {
					require.NoError(t, resp.Body.Close())
				}
				return err
			}
			require.NoError(t, write(), "a write while leading")

			require.NoError(t, tc.end(ctx, f.cs))
			require.NoError(t, write(), "the term cannot know yet: the gate lets the write through")

			renewal := epoch.Add(f.cfg.RetryPeriod)
			require.Eventually(t, func() bool { return clk.armedFor(renewal) }, 5*time.Second, time.Millisecond, "renewal timer armed")
			clk.SetTime(renewal)
			select {
			case <-l.Context().Done():
			case <-time.After(recvDeadline):
				require.FailNow(t, "the renewal did not end the term")
			}
			require.True(t, clk.Now().Before(l.(election.Expiring).ValidUntil()), "the term ended by ValidUntil, not by the renewal")
			cause := context.Cause(l.Context())
			require.ErrorIs(t, cause, election.ErrLeadershipLost)
			require.ErrorContains(t, cause, tc.cause)
			require.True(t, errors.Is(write(), election.ErrNotLeader), "a write after the term ended")
			require.Equal(t, 2, next.sent, "writes that reached the apiserver")
			require.False(t, f.Leading())
			_, ok = f.Current()
			require.False(t, ok, "Current after the term was lost")
		})
	}
}
