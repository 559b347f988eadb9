package kubefake_test

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/kubefake"
)

// A fault answers only the requests it matches, as many times as asked.
func TestFaultMatchesAndIsSpent(t *testing.T) {
	srv := kubefake.Config{}.NewServer(cm("a", nil), cm("b", nil))
	cs := srv.NewClient()
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(ns)
	srv.Inject(kubefake.Fault{Verb: "get", Resource: "configmaps", Name: "a", Answer: kubefake.TooManyRequests(7), Times: 2})

	if _, err := cms.Get(ctx, "b", metav1.GetOptions{}); err != nil {
		t.Fatalf("get of another name: %v", err)
	}
	if _, err := cms.List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("list: %v", err)
	}
	for i := range 2 {
		_, err := cms.Get(ctx, "a", metav1.GetOptions{})
		if s, ok := apierrors.SuggestsClientDelay(err); !apierrors.IsTooManyRequests(err) || !ok || s != 7 {
			t.Fatalf("get %d: %v, want 429 with Retry-After 7", i, err)
		}
	}
	if _, err := cms.Get(ctx, "a", metav1.GetOptions{}); err != nil {
		t.Fatalf("after the fault was spent: %v", err)
	}

	for _, c := range []struct {
		answer kubefake.Answer
		is     func(error) bool
	}{
		{kubefake.InternalError(), apierrors.IsInternalError},
		{kubefake.Unavailable(), apierrors.IsServiceUnavailable},
		{kubefake.Conflict(), apierrors.IsConflict},
		{kubefake.Timeout(), apierrors.IsTimeout},
		{kubefake.ServerTimeout(1), apierrors.IsServerTimeout},
		{kubefake.ConnectionReset(), utilnet.IsConnectionReset},
		{kubefake.ConnectionReset(), utilnet.IsProbableEOF},
	} {
		srv.Inject(kubefake.Fault{Verb: "update", Answer: c.answer, Times: 1})
		cur, _ := cms.Get(ctx, "b", metav1.GetOptions{})
		if _, err := cms.Update(ctx, cur, metav1.UpdateOptions{}); !c.is(err) {
			t.Fatalf("injected answer: got %v", err)
		}
		if after, _ := cms.Get(ctx, "b", metav1.GetOptions{}); after.ResourceVersion != cur.ResourceVersion {
			t.Fatal("a refused update was stored")
		}
	}

	// A predicate and a subresource narrow a fault further.
	srv.Inject(kubefake.Fault{Verb: "get", Subresource: "status", Answer: kubefake.Unavailable()})
	srv.Inject(kubefake.Fault{Namespace: ns, Match: func(a k8stesting.Action) bool {
		return a.GetVerb() == "list"
	}, Answer: kubefake.Conflict(), Times: 1})
	if _, err := cms.Get(ctx, "a", metav1.GetOptions{}); err != nil {
		t.Fatalf("get of the main resource with a fault on status: %v", err)
	}
	if _, err := cms.List(ctx, metav1.ListOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("list matched by a predicate: %v, want 409", err)
	}
	srv.ClearFaults()

	srv.Inject(kubefake.Fault{Resource: "configmaps"})
	if _, err := cms.Get(ctx, "a", metav1.GetOptions{}); !apierrors.IsInternalError(err) {
		t.Fatalf("fault with no answer: %v, want 500", err)
	}
	srv.ClearFaults()
	if _, err := cms.Get(ctx, "a", metav1.GetOptions{}); err != nil {
		t.Fatalf("after ClearFaults: %v", err)
	}
}

// A lost answer: the write is stored, the writer is told it timed out.
// Its retry, with the resourceVersion it read before, conflicts with its
// own write, which is what an idempotent writer must recognise.
func TestLostAnswerAppliesTheWrite(t *testing.T) {
	srv := kubefake.Config{}.NewServer(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "l"}})
	cs := srv.NewClient()
	ctx := context.Background()
	leases := cs.CoordinationV1().Leases(ns)
	srv.Inject(kubefake.LostAnswer("update", "leases", "l"))

	l, _ := leases.Get(ctx, "l", metav1.GetOptions{})
	l.Spec.HolderIdentity = ptr.To("me")
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); !apierrors.IsTimeout(err) {
		t.Fatalf("update with a lost answer: %v, want 504", err)
	}
	got, _ := leases.Get(ctx, "l", metav1.GetOptions{})
	if got.Spec.HolderIdentity == nil || *got.Spec.HolderIdentity != "me" {
		t.Fatal("the write whose answer was lost was not stored")
	}
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("blind retry: %v, want 409", err)
	}
}

// RateLimit lets a burst through, then one request per interval of the
// clock, and tells the others when to come back.
func TestRateLimit(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	srv := kubefake.Config{Clock: clk}.NewServer(cm("a", nil))
	cs := srv.NewClient()
	ctx := context.Background()
	srv.Inject(kubefake.Fault{Verb: "get", Answer: kubefake.RateLimit(clk, 2*time.Second, 3)})
	count := func() (ok, limited int, retry int) {
		for range 10 {
			_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "a", metav1.GetOptions{})
			switch {
			case err == nil:
				ok++
			case apierrors.IsTooManyRequests(err):
				limited++
				retry, _ = apierrors.SuggestsClientDelay(err)
			default:
				t.Fatal(err)
			}
		}
		return ok, limited, retry
	}
	if ok, limited, retry := count(); ok != 3 || limited != 7 || retry != 2 {
		t.Fatalf("burst: %d passed, %d limited (retry after %ds), want 3, 7, 2s", ok, limited, retry)
	}
	clk.Step(4 * time.Second)
	if ok, limited, _ := count(); ok != 2 || limited != 8 {
		t.Fatalf("4s later: %d passed, %d limited, want 2 and 8", ok, limited)
	}
}
