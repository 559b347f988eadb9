package kubestore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/election/lease"
	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
)

// persistentAnswers are the answers a server can give every request for
// ever, as a test's fault injects them on one client.
var persistentAnswers = []struct {
	name  string
	fault func(*kubefake.Server, *kubefake.Client)
	// persistentError: every request fails, and every loop retries.
	persistentError bool
}{
	{"410", everyRequest(kubefake.Fail(apierrors.NewResourceExpired("too old resource version"))), true},
	{"403", everyRequest(kubefake.Fail(apierrors.NewForbidden(schema.GroupResource{Resource: "leases"}, "x", errors.New("RBAC: access denied")))), true},
	{"404", everyRequest(func(a k8stesting.Action) error { return apierrors.NewNotFound(a.GetResource().GroupResource(), "x") }), true},
	{"409", everyRequest(kubefake.Conflict()), true},
	{"422", everyRequest(kubefake.Fail(apierrors.NewInvalid(schema.GroupKind{Kind: "Lease"}, "x",
		field.ErrorList{field.Invalid(field.NewPath("spec"), "x", "invalid")}))), true},
	{"429", everyRequest(kubefake.TooManyRequests(1)), true},
	{"500", everyRequest(kubefake.InternalError()), true},
	{"503", everyRequest(kubefake.Unavailable()), true},
	{"watch ends at once", func(_ *kubefake.Server, c *kubefake.Client) {
		c.PrependWatchReactor("*", func(k8stesting.Action) (bool, watch.Interface, error) {
			w := watch.NewFake()
			w.Stop()
			return true, w, nil
		})
	}, false},
	{"connection refused", func(_ *kubefake.Server, c *kubefake.Client) { c.Cut() }, true},
	{"apiserver restart", func(s *kubefake.Server, _ *kubefake.Client) { s.Restart() }, false},
}

func everyRequest(a kubefake.Answer) func(*kubefake.Server, *kubefake.Client) {
	return func(s *kubefake.Server, _ *kubefake.Client) { s.Inject(kubefake.Fault{Answer: a}) }
}

// loopOf names the loop of a leading node that sent a request, by the
// object or the selection it is about: the election's Lease, the node's
// record and heartbeat (publish, keep-alive), the reaper's Lease, the
// status (fence, reads, writes, its watch), and each listing or watch by
// its selector.
func loopOf(a k8stesting.Action) string {
	switch a := a.(type) {
	case k8stesting.DeleteAction: // before GetAction, which it satisfies
		if a.GetName() == "fleet-status" {
			return objectLoop(a.GetName())
		}
		// The reaper's, but for the node's own once as it stops.
		return "reaper"
	case k8stesting.GetAction:
		return objectLoop(a.GetName())
	case k8stesting.UpdateAction: // creates too: the same method set
		if m, err := meta.Accessor(a.GetObject()); err == nil {
			return objectLoop(m.GetName())
		}
	case k8stesting.ListAction:
		r := a.GetListRestrictions()
		return listLoop(r.Labels.String(), r.Fields.String())
	case k8stesting.WatchAction:
		r := a.GetWatchRestrictions()
		return listLoop(r.Labels.String(), r.Fields.String())
	}
	return a.GetVerb()
}

func objectLoop(name string) string {
	switch {
	case name == "fleet-leader":
		return "election"
	case name == "fleet-status":
		return "leader (status)"
	case name == "fleet-reaper":
		return "reaper"
	case strings.HasPrefix(name, "fleet.") || strings.HasPrefix(name, "fleet-"):
		return "record (publish, keep-alive)"
	}
	return "object " + name
}

func listLoop(labels, fields string) string {
	switch {
	case strings.Contains(fields, "fleet-status"):
		return "status reads and watch"
	case strings.Contains(fields, "fleet-leader"):
		return "election"
	case strings.Contains(labels, kubestore.RoleHeartbeat):
		return "reaper"
	}
	return "records (" + labels + fields + ")"
}

// TestEveryLoopOfALeadingNodeKeepsItsBudget: one node that is ready and
// leads (versiongate on kubestore, elected by election/lease, default
// settings) is given the same answer to every request for 90s of fake
// time, every open watch ended (an apiserver restart alone is the last
// case); every loop (keep-alive and publish, the leader's, the record and
// status watches, the reaper, the election) sends at most one request a
// second from 30s on, whatever the answer. A node stops serving at its
// record's deadline (Run returns ErrRecordLost) and then sends nothing;
// with RejoinAfterRecordLoss it keeps trying to publish, within the same
// budget. A loop whose backoff is removed fails this test.
func TestEveryLoopOfALeadingNodeKeepsItsBudget(t *testing.T) {
	for _, rejoin := range []bool{false, true} {
		for _, a := range persistentAnswers {
			t.Run(fmt.Sprintf("%s/rejoin=%v", a.name, rejoin), func(t *testing.T) {
				if testing.Short() && rejoin && !rejoinUnderShort[a.name] {
					t.Skip("under -short a rejoining node meets only a few answers; the full run gives it every one")
				}
				synctest.Test(t, func(t *testing.T) {
					perLoop, total, instants := leadingNodeRequests(t, a.fault, rejoin)
					var lines []string
					for loop, n := range perLoop {
						lines = append(lines, fmt.Sprintf("%s: %.2f/s", loop, float64(n)/60))
					}
					sort.Strings(lines)
					t.Logf("from 30s to 90s: %.2f requests/s in all; %s", float64(total)/60, strings.Join(lines, "; "))
					for loop, n := range perLoop {
						require.LessOrEqual(t, n, 60, "loop %q sent %d requests in 60s", loop, n)
					}
					if a.persistentError {
						// A second node, alone on its own server, given
						// the same answer at the same instant after its
						// start: no loop of it retries at the instants the
						// first one did.
						_, _, other := leadingNodeRequests(t, a.fault, rejoin)
						requireNotInLockstep(t, instants, other)
					}
				})
			})
		}
	}
}

// rejoinUnderShort names the answers a rejoining node meets under -short:
// its record gone (404), a server error, and a restart. Every answer is
// still given, under -short, to a node that does not rejoin.
var rejoinUnderShort = map[string]bool{"404": true, "503": true, "apiserver restart": true}

// requireNotInLockstep fails if a loop that retried at least three times
// on each of two nodes retried at the same instants (since each was given
// the answer) on both: under a persistent error every retry is drawn with
// jitter, so that agents that failed together, at an apiserver's restart,
// do not retry together for ever. Requests sent at the same instant (a
// read and the write it leads to) are one attempt.
func requireNotInLockstep(t *testing.T, a, b map[string][]time.Duration) {
	t.Helper()
	for loop, at := range a {
		at, bt := slices.Compact(slices.Clone(at)), slices.Compact(slices.Clone(b[loop]))
		if len(at) < 3 || len(bt) < 3 {
			continue
		}
		require.NotEqual(t, at, bt, "loop %q retried at the same instants on two nodes: no jitter", loop)
	}
}

// leadingNodeRequests runs the node until it is ready and its leader's
// start is done, then injects the answer and counts, per loop, the
// requests sent from 30s to 90s after, and returns their instants.
func leadingNodeRequests(t *testing.T, fault func(*kubefake.Server, *kubefake.Client), rejoin bool) (map[string]int, int, map[string][]time.Duration) {
	srv := kubefake.Config{}.NewServer()
	cl := srv.NewClient()
	var mu sync.Mutex
	var start time.Time
	counting := false
	perLoop := map[string]int{}
	instants := map[string][]time.Duration{}
	total := 0
	record := func(a k8stesting.Action) {
		mu.Lock()
		defer mu.Unlock()
		if d := time.Since(start); counting && d >= 30*time.Second && d < 90*time.Second {
			perLoop[loopOf(a)]++
			instants[loopOf(a)] = append(instants[loopOf(a)], d)
			total++
		}
	}
	store, err := kubestore.New(kubestore.Config{Client: cl, Namespace: "agents", Gate: "fleet"})
	require.NoError(t, err)
	elector, err := lease.New(lease.Config{Client: cl, Namespace: "agents", Name: "fleet-leader", Identity: "node-a"})
	require.NoError(t, err)
	v, err := versiongate.ParseVersion("1.4.0")
	require.NoError(t, err)
	gate, err := versiongate.New(versiongate.Config{
		Store: store, NodeID: "node-a", Version: v,
		MinimumCompatibleRelease: versiongate.Release{Major: 1, Minor: 3},
		Candidate:                elector,
		Reconcile:                func(context.Context, versiongate.Term) error { return nil },
		RejoinAfterRecordLoss:    rejoin,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- gate.Run(ctx) }()
	require.NoError(t, gate.WaitReady(ctx))
	for gate.Phase() != versiongate.PhaseDone {
		<-gate.PhaseChanged()
	}
	synctest.Wait()
	mu.Lock()
	start, counting = time.Now(), true
	mu.Unlock()
	fault(srv, cl)
	// In front of every reactor, the fault's too, so that every request
	// the node makes counts.
	cl.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) { record(a); return false, nil, nil })
	cl.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) { record(a); return false, nil, nil })
	// Every open watch ends too, as when the answer comes from an
	// apiserver that restarted: each watch loop meets the answer.
	srv.EndWatches()
	timer := time.NewTimer(90 * time.Second)
	select {
	case err := <-done:
		if !rejoin {
			require.ErrorIs(t, err, versiongate.ErrRecordLost)
		}
		<-timer.C
	case <-timer.C:
	}
	cancel()
	synctest.Wait()
	mu.Lock()
	defer mu.Unlock()
	return perLoop, total, instants
}
