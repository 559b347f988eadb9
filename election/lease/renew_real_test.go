package lease_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/lease"
)

// The tests of this file run the leader's renewals against the real
// kube-apiserver, made to answer every renewal with the same error for
// good, while the elector's own clock is a fake that the test steps from
// one armed timer to the next. The wire is real, the time is not: a
// renewal is sent when the test moves the clock to the instant its timer
// was armed for, and the test moves on only once the loop has armed its
// next timer (or the term has ended), so neither the machine's speed nor
// the scheduler changes what is counted.
//
// The persistent answers are real answers of the real server:
//   - 403 and 422: a ValidatingAdmissionPolicy that refuses every update
//     of the Lease, bound as the term begins, with reason
//     Forbidden (403) or the default Invalid (422). The test apiserver
//     runs --authorization-mode=AlwaysAllow, and the flag is a list that
//     further values extend, not replace, so RBAC never gets to refuse
//     anything there; admission is the real server's way to a 403.
//   - 409: another writer (an admin client) changes the Lease's
//     annotations between each of the elector's reads and its next write,
//     so every renewal the server sees carries a stale resourceVersion.

// renewFault makes the real server answer every renewal of Lease name
// with the same error from now on; the returned func clears it.
type renewFault struct {
	name  string
	code  int // the answer to every update of the Lease
	start func(t *testing.T, ctx context.Context, admin kubernetes.Interface, w *wire, name string) (clear func())
}

var renewFaults = []renewFault{
	{"403 by admission", http.StatusForbidden, admissionFault(metav1.StatusReasonForbidden)},
	{"409 from another writer", http.StatusConflict, writerFault},
	{"422 by admission", http.StatusUnprocessableEntity, admissionFault("")},
}

// admissionFault binds a ValidatingAdmissionPolicy that refuses every
// update of the Lease with reason (empty: the default, Invalid), and waits
// until a dry-run update of the Lease meets the refusal; clearing deletes
// the binding and waits until a dry-run update passes again.
func admissionFault(reason metav1.StatusReason) func(*testing.T, context.Context, kubernetes.Interface, *wire, string) func() {
	return func(t *testing.T, ctx context.Context, admin kubernetes.Interface, _ *wire, name string) func() {
		t.Helper()
		v := admissionv1.Validation{
			Expression: fmt.Sprintf("object.metadata.name != %q", name),
			Message:    "updates of this Lease are refused",
		}
		if reason != "" {
			v.Reason = &reason
		}
		policies := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies()
		_, err := policies.Create(ctx, &admissionv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: ptr.To(admissionv1.Fail),
				MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: []admissionv1.OperationType{admissionv1.Update},
						Rule: admissionv1.Rule{
							APIGroups: []string{"coordination.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"leases"},
						},
					},
				}}},
				Validations: []admissionv1.Validation{v},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err, "creating the admission policy")
		t.Cleanup(func() { _ = policies.Delete(context.Background(), name, metav1.DeleteOptions{}) })
		bindings := admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
		_, err = bindings.Create(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        name,
				ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err, "binding the admission policy")
		t.Cleanup(func() { _ = bindings.Delete(context.Background(), name, metav1.DeleteOptions{}) })
		want := http.StatusForbidden
		if reason == "" {
			want = http.StatusUnprocessableEntity
		}
		awaitDryRun(t, ctx, admin, name, want)
		return func() {
			require.NoError(t, bindings.Delete(ctx, name, metav1.DeleteOptions{}), "unbinding the admission policy")
			awaitDryRun(t, ctx, admin, name, 0)
		}
	}
}

// awaitDryRun waits until a dry-run update of Lease name is answered with
// code (0: success): an admission policy takes effect once the apiserver
// has loaded it, not when its create returns.
func awaitDryRun(t *testing.T, ctx context.Context, admin kubernetes.Interface, name string, code int) {
	t.Helper()
	leases := admin.CoordinationV1().Leases(testNamespace)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(receiveDeadline)
	var last error
	for {
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		_, last = leases.Update(ctx, l, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		got := 0
		if last != nil {
			got = -1
			var st apierrors.APIStatus
			if errors.As(last, &st) {
				got = int(st.Status().Code)
			}
		}
		if got == code {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("a dry-run update of the Lease did not get %d within %v; last: %v", code, receiveDeadline, last)
		}
	}
}

// writerFault has another writer change the Lease's annotations right
// before each update the elector sends, so that the update's
// resourceVersion is stale when it lands: the server answers 409.
func writerFault(t *testing.T, _ context.Context, admin kubernetes.Interface, w *wire, name string) func() {
	t.Helper()
	var n atomic.Int64
	w.setBefore(func(req *http.Request) error {
		if !strings.HasSuffix(req.URL.Path, "/leases/"+name) {
			return nil
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"reconkit.test/other-writer":"%d"}}}`, n.Add(1))
		_, err := admin.CoordinationV1().Leases(testNamespace).Patch(req.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if err != nil && req.Context().Err() == nil { // else the term ended, cancelling the update too
			return fmt.Errorf("the other writer: %w", err)
		}
		return nil
	})
	return func() { w.setBefore(nil) }
}

// driveTerm steps clk from timer to timer up to until, or until stop
// returns true (checked after each step settled); its messages count time
// from start. After each step it waits until every timer that fired was
// armed again, or the term ended: the renewal loop arms its timer again
// after its renewal's answer, the watchdog ends the term. It returns the
// instant the term ended on clk (zero if it did not) and the number of
// steps.
func driveTerm(t *testing.T, clk *stepClock, l election.Leadership, start, until time.Time, stop func() bool) (ended time.Time, steps int) {
	t.Helper()
	done := l.Context().Done()
	for {
		if ended.IsZero() && l.Context().Err() != nil {
			ended = clk.Now()
		}
		if stop != nil && stop() {
			return ended, steps
		}
		next, ok := clk.next()
		if !ok || next.After(until) {
			require.True(t, ok || !ended.IsZero(), "no timer armed while the term lives")
			clk.fire(until)
			return ended, steps
		}
		steps++
		require.Less(t, steps, maxSteps, "%d steps of the clock before %v: the renewal loop spins", steps, until.Sub(start))
		fired := clk.fire(next)
		deadline := time.After(receiveDeadline)
		for !clk.rearmed(fired) && l.Context().Err() == nil {
			select {
			case <-clk.armed:
			case <-done:
			case <-deadline:
				t.Fatalf("waited %v for the timers fired at %v to be armed again or the term to end: "+
					"a goroutine whose timer fired did neither (a watchdog that let the term outlive ValidUntil)", receiveDeadline, next.Sub(start))
			}
		}
	}
}

// realTerm starts an elector with clock clk on the shared apiserver, its
// requests counted by a wire, and returns its term.
func realTerm(t *testing.T, ctx context.Context, ld, rd, rp time.Duration) (*lease.Elector, election.Leadership, *stepClock, *wire, kubernetes.Interface, string) {
	t.Helper()
	a := apiServer(t)
	name := uniqueName("renewreal")
	clk := newStepClock(time.Now())
	w := &wire{clk: clk}
	cfg := a.Config()
	cfg.WrapTransport = w.wrap
	e := newLease(t, cfg, name, func(c *lease.Config) {
		c.LeaseDuration, c.RenewDeadline, c.RetryPeriod, c.Clock = ld, rd, rp, clk
	})
	closeOnCleanup(t, e)
	l, err := e.Campaign(ctx)
	require.NoError(t, err)
	// The term's goroutines arm their timers after Campaign returns: wait
	// for the renewal's, a RetryPeriod on, and the watchdog's, at
	// ValidUntil, before the clock moves.
	now := clk.Now()
	deadline := time.After(receiveDeadline)
	for !clk.armedAt(now.Add(rp)) || !clk.armedAt(now.Add(rd)) {
		select {
		case <-clk.armed:
		case <-deadline:
			t.Fatalf("waited %v for the term to arm its renewal and its watchdog", receiveDeadline)
		}
	}
	return e, l, clk, w, clientset(t, a.Config()), name
}

// TestRenewalBudgetOnRealAPIServer is TestRenewalBudgetWithLongRenewDeadline
// on the real kube-apiserver: a leader with a RenewDeadline above the 30 s
// after which the budget applies meets a persistent answer to every
// renewal from the moment it leads. Counted at the transport, on the
// elector's clock, from 30 s of the answer to 1 s after RenewDeadline: at
// most one request a second. The term ends at RenewDeadline from its
// start (no renewal succeeded), never later, with ErrLeadershipLost; no
// instant sees more than one renewal's requests (three updates and three
// reads under 409), and the loop's timer is never armed twice for one
// instant. A fixed RetryPeriod sent 1/RetryPeriod for the whole
// RenewDeadline, six times that under 409.
func TestRenewalBudgetOnRealAPIServer(t *testing.T) {
	timings := []struct{ ld, rd, rp time.Duration }{
		{60 * time.Second, 50 * time.Second, 2 * time.Second},
		{60 * time.Second, 50 * time.Second, 500 * time.Millisecond},
	}
	for _, tm := range timings {
		for _, f := range renewFaults {
			t.Run(fmt.Sprintf("%v-%v-%v/%s", tm.ld, tm.rd, tm.rp, f.name), func(t *testing.T) {
				realRenewalBudget(t, tm.ld, tm.rd, tm.rp, f)
			})
		}
	}
}

func realRenewalBudget(t *testing.T, ld, rd, rp time.Duration, f renewFault) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, l, clk, w, admin, name := realTerm(t, ctx, ld, rd, rp)
	f.start(t, ctx, admin, w, name)
	start := clk.Now() // the term's start: no renewal was due yet
	w.from(start)

	end := start.Add(rd + time.Second)
	ended, steps := driveTerm(t, clk, l, start, end, nil)
	require.False(t, ended.IsZero(), "the term outlived RenewDeadline + 1 s of failed renewals")
	require.ErrorIs(t, context.Cause(l.Context()), election.ErrLeadershipLost)
	rctx, rcancel := context.WithTimeout(ctx, closeDeadline)
	defer rcancel()
	_ = l.Resign(rctx) // waits for the term's goroutines; a lost term is not released
	reqs := w.snapshot()
	w.mu.Lock()
	require.Empty(t, w.errs)
	w.mu.Unlock()

	var late, puts int
	perInstant := map[time.Duration]int{}
	var at []time.Duration
	for _, r := range reqs {
		at = append(at, r.at)
		perInstant[r.at]++
		if r.at >= 30*time.Second && r.at <= rd+time.Second {
			late++
		}
		if r.code == 0 && r.at == ended.Sub(start) {
			continue // sent as the term ended, which cancelled it
		}
		switch r.method {
		case http.MethodPut:
			puts++
			require.Equal(t, f.code, r.code, "an update at %v was not answered %d: the fault did not hold", r.at, f.code)
		case http.MethodGet:
			require.Equal(t, http.StatusOK, r.code, "the read after a conflict at %v", r.at)
		default:
			require.Failf(t, "unexpected request", "%s at %v: a leader sends updates, and reads after conflicts", r.method, r.at)
		}
	}
	most := 0
	for _, n := range perInstant {
		most = max(most, n)
	}
	t.Logf("%s, RetryPeriod %v: term ended at %v; %d requests (%d updates) in %d clock steps, %d from 30 s to %v, at most %d at one instant: %v",
		f.name, rp, ended.Sub(start), len(reqs), puts, steps, late, rd+time.Second, most, at)

	window := rd + time.Second - 30*time.Second
	require.LessOrEqual(t, late, int(window/time.Second), "requests from 30 s to %v: more than one a second", rd+time.Second)
	require.LessOrEqual(t, ended.Sub(start), rd, "the term outlived its validity")
	require.GreaterOrEqual(t, ended.Sub(start), rd-rp, "the term ended early")
	require.LessOrEqual(t, most, 6, "more than one renewal's requests at one instant: the loop spins")
	require.NotZero(t, puts, "no renewal was sent")
}

// TestRenewalRecoversOnRealAPIServer clears the persistent answer 20 s into
// the failures, well within the term: the next retry succeeds on the real
// server, the term lives on with ValidUntil a RenewDeadline after that
// renewal, and the loop is back to renewing every RetryPeriod.
func TestRenewalRecoversOnRealAPIServer(t *testing.T) {
	const ld, rd, rp = 60 * time.Second, 50 * time.Second, 2 * time.Second
	for _, f := range renewFaults[:2] {
		t.Run(f.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			_, l, clk, w, admin, name := realTerm(t, ctx, ld, rd, rp)
			clear := f.start(t, ctx, admin, w, name)
			start := clk.Now()
			w.from(start)
			ended, _ := driveTerm(t, clk, l, start, start.Add(20*time.Second), nil)
			require.True(t, ended.IsZero(), "the term ended before the answer cleared")
			failed := len(w.snapshot())
			clear()
			cleared := clk.Now()

			var ok *wireRequest
			succeeded := func() bool {
				for _, r := range w.snapshot() {
					if r.method == http.MethodPut && r.code == http.StatusOK {
						ok = &r
						return true
					}
				}
				return false
			}
			ended, _ = driveTerm(t, clk, l, start, start.Add(rd), succeeded)
			require.True(t, ended.IsZero(), "the term ended although the answer cleared %v before its end", rd-20*time.Second)
			require.NotNil(t, ok, "no renewal succeeded after the answer cleared")
			renewed := start.Add(ok.at)
			t.Logf("%s: %d requests in 20 s of failures; cleared at %v, renewed at %v", f.name, failed, cleared.Sub(start), ok.at)
			require.NoError(t, l.Context().Err())
			require.Equal(t, renewed.Add(rd), l.(election.Expiring).ValidUntil(), "ValidUntil counts from the renewal that succeeded")
			require.Eventually(t, func() bool { return clk.armedAt(renewed.Add(rp)) }, receiveDeadline, 10*time.Millisecond,
				"the next renewal is not due a RetryPeriod after the one that succeeded")
			require.NoError(t, l.Resign(ctx))
		})
	}
}
