package checkpoint

import "time"

// ConditionConfigOK is the type of the node condition the Controller
// reports. It is an untyped constant, so it converts to a Kubernetes
// NodeConditionType where a host needs one.
const ConditionConfigOK = "ConfigOK"

// ConditionStatus is the status of a [Condition]: "True", "False" or
// "Unknown", as in Kubernetes conditions.
type ConditionStatus string

// Condition statuses.
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// Condition is the ConfigOK condition a [Controller] reports, shaped as a
// Kubernetes NodeCondition so that a host copies it field by field, but
// free of Kubernetes types so that the package compiles without them.
type Condition struct {
	// Type is ConditionConfigOK.
	Type string
	// Status is ConditionTrue when the assigned (or local) configuration
	// runs as intended, ConditionFalse when it was refused or rolled back.
	Status ConditionStatus
	// Reason is a CamelCase word naming the phase or the failed step
	// (ReasonLocal, ReasonProbeFailed, ...).
	Reason string
	// Message names the checkpoint and the error.
	Message string
	// LastTransitionTime is when Status last changed, on the controller's
	// clock.
	LastTransitionTime time.Time
}

// ConditionReporter receives the ConfigOK condition. Its method set is the
// one a node-status provider offers for conditions set by other
// components, so such a provider plugs in as Config.Conditions directly.
//
// Threading contract: the Controller calls ReportCondition once at
// Bootstrap and then at every change of the condition's status, reason or
// message, in order, from the goroutine calling Bootstrap, Assign, Confirm
// or Rollback or running Run's trial checks and source, with the
// controller's lock held. It must not block (record the condition and
// write it elsewhere from a goroutine of its own) and must not call back
// into the Controller.
type ConditionReporter interface {
	ReportCondition(conditionType, status, reason, message string)
}

// ConditionReporterFunc adapts a function to [ConditionReporter].
type ConditionReporterFunc func(conditionType, status, reason, message string)

// ReportCondition calls f.
func (f ConditionReporterFunc) ReportCondition(conditionType, status, reason, message string) {
	f(conditionType, status, reason, message)
}

var _ ConditionReporter = ConditionReporterFunc(nil)
