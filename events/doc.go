// Package events adapts client-go's event recorder to the EventRecorder
// every reconkit package accepts.
//
// Each package (checkpoint, election, versiongate, nodestatus, ...)
// declares EventRecorder interface{ Event(eventtype, reason, message string) }
// and records events about the object it works for, which the host knows
// and the package does not. [ForObject] binds a client-go
// record.EventRecorder to that object (a Node, a Lease, a ConfigMap), so
// one value serves every package:
//
//	rec := events.ForObject(broadcaster.NewRecorder(scheme.Scheme, source), node)
//	checkpoint.Config[T]{..., Events: rec}
//
// client-go's recorder does not block: it drops events when its queue is
// full, so the adapter meets the packages' threading contracts. Event
// types are "Normal" and "Warning" (corev1.EventTypeNormal and
// corev1.EventTypeWarning), reasons CamelCase words.
//
// # Request budget
//
// The requests are the broadcaster's, which the host starts
// (StartRecordingToSink). With client-go's defaults an agent sends at
// most one request per second about one object whatever the API server
// answers: the correlator lets 25 events of one object through at once
// and then one per 5 minutes, an event refused with a status (403, 404,
// 409, 410, 422, 429, 5xx) is dropped, not retried, and one that cannot
// reach the server is retried up to 12 times, 10 s apart, one event at a
// time (TestRequestBudgetUnderPersistentAnswers, with an event every
// 100 ms). A host that raises the correlator's QPS or burst gives that
// up.
package events
