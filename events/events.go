package events

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// Recorder records events about one object through a client-go
// record.EventRecorder. Its method set is the EventRecorder every reconkit
// package declares. The zero value, and one built over a nil recorder,
// records nothing.
type Recorder struct {
	rec record.EventRecorder
	obj runtime.Object
}

// ForObject returns a Recorder that records every event about obj through
// rec. obj is referenced, not copied: the recorder reads its kind, name,
// namespace, UID and resourceVersion when each event is recorded.
func ForObject(rec record.EventRecorder, obj runtime.Object) Recorder {
	return Recorder{rec: rec, obj: obj}
}

// Event records an event of eventtype ("Normal" or "Warning") with a
// CamelCase reason and a message about the Recorder's object. It does not
// block.
func (r Recorder) Event(eventtype, reason, message string) {
	if r.rec == nil || r.obj == nil {
		return
	}
	r.rec.Event(r.obj, eventtype, reason, message)
}
