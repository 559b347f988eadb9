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
package events
