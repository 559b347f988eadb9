package events_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/reconkit/reconkit/events"
)

// objects is a record.EventRecorder that keeps the object of every event.
type objects struct {
	record.EventRecorder
	got []runtime.Object
}

func (o *objects) Event(obj runtime.Object, _, _, _ string) { o.got = append(o.got, obj) }

// The object is referenced, not copied: an event names the object as it is
// when the event is recorded (its UID and resourceVersion after the host
// registered or updated it), not as it was when the Recorder was built.
func TestForObjectReadsTheObjectAtEachEvent(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	o := &objects{}
	rec := events.ForObject(o, node)
	node.UID, node.ResourceVersion = "u-1", "7"
	rec.Event(corev1.EventTypeNormal, "Registered", "registered")
	require.Len(t, o.got, 1)
	got := o.got[0].(*corev1.Node)
	require.Equal(t, "u-1", string(got.UID))
	require.Equal(t, "7", got.ResourceVersion)
}
