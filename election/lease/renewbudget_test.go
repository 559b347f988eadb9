package lease

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/kubefake"
)

// TestRenewalBudgetWithLongRenewDeadline: leaders at allowed timings whose
// RenewDeadline outlasts the 30 s after which the budget applies meet the
// same answer from the moment they lead; their renewals fail until the
// term ends. Counted in a synctest bubble, per leader, every request on
// Leases from 30 s of the answer to 1 s after RenewDeadline (the term's
// end, its release and Run's next campaign included): at most one a
// second. The two leaders, of two elections on two servers, meet the
// answer at the same instant and must not retry at the same instants
// (jitter). A fixed RetryPeriod sent 1/RetryPeriod for the whole
// RenewDeadline, and six times that under 409 (three updates, each
// followed by a read), breaking the budget at 2 s under 409 and at 500 ms
// under any answer.
func TestRenewalBudgetWithLongRenewDeadline(t *testing.T) {
	timings := []struct{ ld, rd, rp time.Duration }{
		{60 * time.Second, 50 * time.Second, 2 * time.Second},
		{60 * time.Second, 50 * time.Second, 500 * time.Millisecond},
	}
	for _, tm := range timings {
		for _, tc := range persistentAnswers {
			switch tc.name {
			case "410 on every watch", "every watch ends at once", "connection refused", "404 on every request":
				// The leader sends no watch; a refused connection fails at
				// once like a 503; a 404 ends the term at once, and what
				// follows is the follower's polling.
				continue
			}
			t.Run(fmt.Sprintf("%v-%v-%v/%s", tm.ld, tm.rd, tm.rp, tc.name), func(t *testing.T) {
				renewalBudget(t, tm.ld, tm.rd, tm.rp, tc.inject)
			})
		}
	}
}

func renewalBudget(t *testing.T, ld, rd, rp time.Duration, inject func(*kubefake.Server, *kubefake.Client, func())) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var at [2][]time.Duration // request instants from the answer's start
		var ended [2]time.Duration
		var start time.Time
		counting := false
		ctx, cancel := context.WithCancel(context.Background())
		var electors [2]*Elector
		var dones [2]chan error
		var injections []func()
		for i := range 2 {
			srv := kubefake.Config{}.NewServer()
			cli := srv.NewClient()
			cli.PrependReactor("*", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
				mu.Lock()
				defer mu.Unlock()
				if counting {
					at[i] = append(at[i], time.Since(start))
				}
				return false, nil, nil
			})
			e, err := New(Config{Client: cli, Namespace: "ns", Name: "lease", Identity: "me",
				LeaseDuration: ld, RenewDeadline: rd, RetryPeriod: rp})
			require.NoError(t, err)
			electors[i], dones[i] = e, make(chan error, 1)
			first := true
			go func() {
				dones[i] <- election.Run(ctx, e, func(ctx context.Context, _ election.Leadership) error {
					<-ctx.Done()
					mu.Lock()
					if first && counting {
						ended[i], first = time.Since(start), false
					}
					mu.Unlock()
					return nil
				})
			}()
			injections = append(injections, func() { inject(srv, cli, func() {}) })
		}
		synctest.Wait()
		for _, e := range electors {
			require.True(t, e.Leading())
		}
		mu.Lock()
		for _, in := range injections {
			in()
		}
		start, counting = time.Now(), true
		mu.Unlock()
		<-time.After(rd + time.Second)
		mu.Lock()
		counting = false
		mu.Unlock()
		cancel()
		for i, e := range electors {
			require.NoError(t, <-dones[i])
			require.NoError(t, e.Close())
		}

		for i := range at {
			var late []time.Duration
			for _, d := range at[i] {
				if d >= 30*time.Second {
					late = append(late, d)
				}
			}
			t.Logf("leader %d: term ended at %v; %d requests, %d from 30 s: %v", i, ended[i], len(at[i]), len(late), at[i])
			window := rd + time.Second - 30*time.Second
			require.LessOrEqual(t, len(late), int(window/time.Second), "leader %d: requests from 30 s to %v: more than one a second", i, rd+time.Second)
			// The term lasts its RenewDeadline from the last renewal, retries
			// or not: it ends between RenewDeadline less a RetryPeriod (when
			// the last renewal was) and RenewDeadline.
			require.LessOrEqual(t, ended[i], rd, "leader %d: the term outlived its validity", i)
			require.GreaterOrEqual(t, ended[i], rd-rp, "leader %d: the term ended early", i)
		}
		// Retries after the first failed renewal (due at the same instant
		// for both) and before the term's end must not coincide.
		retries := func(i int) []time.Duration {
			var out []time.Duration
			for _, d := range at[i] {
				if d > at[i][0] && d < ended[i] {
					out = append(out, d)
				}
			}
			return out
		}
		a, b := retries(0), retries(1)
		shared := 0
		for _, d := range a {
			if slices.Contains(b, d) {
				shared++
			}
		}
		require.Zero(t, shared, "the two leaders retried at %d shared instants (no jitter)", shared)
	})
}
