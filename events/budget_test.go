package events_test

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/reconkit/reconkit/events"
	"github.com/reconkit/reconkit/kubefake"
)

// TestRequestBudgetUnderPersistentAnswers holds the budget of the events
// a Recorder records, sent by a client-go broadcaster to the API server:
// with the host recording an event about its Node every 100 ms (a
// condition that flaps), and the server giving the same answer to every
// request, the agent sends at most one request per second in every 10 s
// window from 30 s to 90 s. client-go's correlator lets 25 events of one
// object through at once and then one per 5 minutes; an event the
// server refuses with a status is dropped, and one that cannot reach it
// is retried 12 times, 10 s apart. The time is the synctest bubble's.
func TestRequestBudgetUnderPersistentAnswers(t *testing.T) {
	evs := schema.GroupResource{Resource: "events"}
	every := func(a kubefake.Answer) func(*kubefake.Server, *kubefake.Client) {
		return func(s *kubefake.Server, _ *kubefake.Client) { s.Inject(kubefake.Fault{Answer: a}) }
	}
	for _, tc := range []struct {
		name  string
		fault func(*kubefake.Server, *kubefake.Client)
	}{
		{"the server accepts every event", func(*kubefake.Server, *kubefake.Client) {}},
		{"410 Gone", every(kubefake.Fail(apierrors.NewResourceExpired("too old resource version")))},
		{"403 Forbidden", every(kubefake.Fail(apierrors.NewForbidden(evs, "e", errors.New("RBAC: access denied"))))},
		{"404 Not Found", every(kubefake.Fail(apierrors.NewNotFound(evs, "e")))},
		{"409 Conflict", every(kubefake.Conflict())},
		{"422 Invalid", every(kubefake.Fail(apierrors.NewInvalid(schema.GroupKind{Kind: "Event"}, "e",
			field.ErrorList{field.Invalid(field.NewPath("message"), "x", "invalid")})))},
		{"429 with Retry-After 1", every(kubefake.TooManyRequests(1))},
		{"500 Internal Error", every(kubefake.InternalError())},
		{"503 Unavailable", every(kubefake.Unavailable())},
		{"connection refused", func(_ *kubefake.Server, c *kubefake.Client) { c.Cut() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := kubefake.Config{}.NewServer()
				cl := srv.NewClient()
				var mu sync.Mutex
				var at []time.Time
				cl.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
					mu.Lock()
					at = append(at, time.Now())
					mu.Unlock()
					return false, nil, nil
				})
				tc.fault(srv, cl)
				b := record.NewBroadcaster()
				b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cl.CoreV1().Events("")})
				node := &corev1.Node{
					TypeMeta:   metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
					ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "u-1"},
				}
				rec := events.ForObject(b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "agent"}), node)
				t0 := time.Now()
				for i := 0; time.Since(t0) < 90*time.Second; i++ {
					status := "True"
					if i%2 == 1 {
						status = "False"
					}
					rec.Event(corev1.EventTypeWarning, "ReadyChanged", "Ready is "+status)
					time.Sleep(100 * time.Millisecond) // the bubble's clock
				}
				b.Shutdown()
				synctest.Wait()
				mu.Lock()
				defer mu.Unlock()
				var late []time.Duration
				for _, a := range at {
					if d := a.Sub(t0); d >= 30*time.Second && d < 90*time.Second {
						late = append(late, d)
					}
				}
				most := 0
				for i := range late {
					j := i
					for j < len(late) && late[j]-late[i] < 10*time.Second {
						j++
					}
					most = max(most, j-i)
				}
				t.Logf("%d requests in all, %d from 30 s to 90 s, at most %d in 10 s", len(at), len(late), most)
				require.NotEmpty(t, at, "the server was reached")
				require.LessOrEqual(t, most, 10, "more than one request per second over 10 s, 30 s into the answer")
			})
		})
	}
}
