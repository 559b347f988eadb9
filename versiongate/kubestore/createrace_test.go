package kubestore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
)

// A record deleted or edited after the server created it but before the
// create's answer reached its publisher, and seen by the publisher's
// store in that window (its watch, or a listing), is not missed: the
// deleted record is lost at the next keep-alive, the edited one repaired.
// Missing the deletion wedged a node for good: the store never learned
// that its record was gone, and its keep-alives went on renewing the
// heartbeat, so that nothing published the record again (seen once, under
// load, in TestRecordOrHeartbeatDeletedMidHeartbeatIsPublishedAgain). In
// both record modes; "listed" sees the deletion in a listing, the others
// through the watch.
func TestRecordChangedBeforeTheCreateAnswersIsNotMissed(t *testing.T) {
	for _, mode := range []string{"records", "nodelease"} {
		for _, change := range []string{"deleted", "listed", "edited"} {
			t.Run(mode+"/"+change, func(t *testing.T) {
				ctx := testCtx(t)
				srv := kubefake.Config{}.NewServer()
				cl, op := srv.NewClient(), srv.NewClient()
				gate := "race"
				var st *kubestore.Store
				var hooked atomic.Bool
				var hookErr error
				hc := hookedClient{Interface: cl, after: func(l *coordinationv1.Lease) {
					if l.Name == gate+"-n1" && !hooked.Swap(true) {
						hookErr = changeBeforeAnswer(ctx, st, op, gate, change)
					}
				}}
				st = newStore(t, hc, gate, nil)
				if mode == "nodelease" {
					st = newNodeLeaseStore(t, hc, gate, newFakeClock(), newRenewer(cl, newFakeClock()).renew)
				}
				if change != "listed" {
					watchFromNow(t, st)
				}
				publishAcross(t, ctx, st, op, gate, change, &hooked, &hookErr)
			})
		}
	}
}

// TestRecordChangedBeforeTheCreateAnswersIsNotMissed on a real apiserver:
// the deletion is made between the server's answer to the record's create
// and the publisher reading it, and seen by the store's real watch.
func TestRecordChangedBeforeTheCreateAnswersIsNotMissedAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver (internal/testenv); skipped under -short")
	}
	cfg := apiServer(t)
	op := clientFor(t, cfg)
	for _, change := range []string{"deleted", "edited"} {
		t.Run(change, func(t *testing.T) {
			ctx := testCtx(t)
			gate := uniqueGate("race")
			var st *kubestore.Store
			var hooked atomic.Bool
			var hookErr error
			st = newStore(t, hookedClient{Interface: clientFor(t, cfg), after: func(l *coordinationv1.Lease) {
				if l.Name == gate+"-n1" && !hooked.Swap(true) {
					hookErr = changeBeforeAnswer(ctx, st, op, gate, change)
				}
			}}, gate, nil)
			watchFromNow(t, st)
			publishAcross(t, ctx, st, op, gate, change, &hooked, &hookErr)
		})
	}
}

// watchFromNow runs st's listing and watch until the test ends, and
// returns once the listing is applied, so that the watch shows every
// change after it.
func watchFromNow(t *testing.T, st *kubestore.Store) {
	t.Helper()
	runWatch(t, st)
	require.True(t, within(time.Minute, func() bool { return kubestore.Covered(st) > 0 }), "the store did not list its records within a minute")
}

// within polls cond every millisecond until it holds (true) or d has
// passed (false).
func within(d time.Duration, cond func() bool) bool {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			return cond()
		case <-tick.C:
		}
	}
	return true
}

// changeBeforeAnswer makes change to record n1 of gate through op, and
// waits until st has seen it (or lists, for "listed").
func changeBeforeAnswer(ctx context.Context, st *kubestore.Store, op kubernetes.Interface, gate, change string) error {
	leases := op.CoordinationV1().Leases(testNamespace)
	name := gate + "-n1"
	seen := func(known, deleted bool, value []byte) bool { return known && deleted }
	switch change {
	case "deleted", "listed":
		if err := leases.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return err
		}
	case "edited":
		cur, err := leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Annotations[kubestore.AnnotationValue] = b64("typo")
		if _, err := leases.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return err
		}
		seen = func(known, deleted bool, value []byte) bool { return known && !deleted && string(value) == b64("typo") }
	}
	if change == "listed" {
		_, _, err := st.ListRecords(ctx)
		return err
	}
	if !within(time.Minute, func() bool { return seen(kubestore.Seen(st, "n1")) }) {
		return fmt.Errorf("the store's watch did not show the record %s within a minute", change)
	}
	return nil
}

// publishAcross publishes record n1 through st, whose create hook
// (hooked, hookErr) makes change, and checks the record published: lost
// if it was deleted, its value written back at the next keep-alive if
// edited.
func publishAcross(t *testing.T, ctx context.Context, st *kubestore.Store, op kubernetes.Interface, gate, change string, hooked *atomic.Bool, hookErr *error) {
	t.Helper()
	l, err := st.PublishRecord(ctx, "n1", []byte("v"), 10*time.Second)
	require.NoError(t, err)
	require.True(t, hooked.Load(), "the record's create was not staged")
	require.NoError(t, *hookErr)
	_, err = st.KeepAlive(ctx, l)
	if change != "edited" {
		require.ErrorIs(t, err, versiongate.ErrRecordLost, "a record %s before its create answered was missed", change)
		return
	}
	require.NoError(t, err)
	cur, err := op.CoordinationV1().Leases(testNamespace).Get(ctx, gate+"-n1", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, b64("v"), cur.Annotations[kubestore.AnnotationValue], "a record edited before its create answered was not repaired")
}

// hookedClient is Interface whose Lease creates call after with the
// object created, once the server answered and before the caller sees
// the answer.
type hookedClient struct {
	kubernetes.Interface
	after func(*coordinationv1.Lease)
}

func (c hookedClient) CoordinationV1() coordclient.CoordinationV1Interface {
	return hookedCoordination{CoordinationV1Interface: c.Interface.CoordinationV1(), after: c.after}
}

type hookedCoordination struct {
	coordclient.CoordinationV1Interface
	after func(*coordinationv1.Lease)
}

func (c hookedCoordination) Leases(ns string) coordclient.LeaseInterface {
	return hookedLeases{LeaseInterface: c.CoordinationV1Interface.Leases(ns), after: c.after}
}

type hookedLeases struct {
	coordclient.LeaseInterface
	after func(*coordinationv1.Lease)
}

func (l hookedLeases) Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	out, err := l.LeaseInterface.Create(ctx, lease, opts)
	if err == nil {
		l.after(out)
	}
	return out, err
}
