package versiongate

import "fmt"

// Ready reports whether a node of release local may start serving on the
// reconciled state st, given the lowest reconciler release the node needs
// (minReconciler). When it may not, reason says why.
//
// A WORKING status does not block: a node compatible with both the state
// before and the state after the ongoing reconciliation may serve either
// way, and a reconciler that never finishes then does not stop nodes from
// starting. The initial reconcile writes no status until it is done.
func Ready(st Status, local, minReconciler Release) (ok bool, reason string) {
	if local.Less(st.MinimumCompatibleRelease) {
		return false, fmt.Sprintf("local release %s is below the minimum compatible release %s", local, st.MinimumCompatibleRelease)
	}
	if st.Version.Release.Less(minReconciler) {
		return false, fmt.Sprintf("reconciler release %s is below the minimum reconciler release %s this node needs", st.Version.Release, minReconciler)
	}
	return true, ""
}

// Action is what a newly elected leader does with the status it finds.
type Action int

const (
	// ActionCreate: no (valid) status exists. Reconcile, then create the
	// target status.
	ActionCreate Action = iota + 1
	// ActionLeave: the status already is the target; leave it.
	ActionLeave
	// ActionSetWorking: the status admits no node that the target state
	// would not; mark it WORKING, reconcile, then write the target.
	ActionSetWorking
	// ActionRestrict: the status admits nodes that are incompatible with
	// the target state. Wait until no such node is left, write the
	// intersection of both statuses (see Restricted), reconcile, then
	// write the target.
	ActionRestrict
)

// String names the action.
func (a Action) String() string {
	switch a {
	case ActionCreate:
		return "create"
	case ActionLeave:
		return "leave"
	case ActionSetWorking:
		return "set-working"
	case ActionRestrict:
		return "restrict"
	}
	return "unknown"
}

// Decide returns what a leader whose finished status would be target does
// with the current status; current is nil when no valid status exists.
func Decide(current *Status, target Status) Action {
	switch {
	case current == nil:
		return ActionCreate
	case *current == target:
		return ActionLeave
	case !target.Version.Release.Less(current.Version.Release) &&
		!current.MinimumCompatibleRelease.Less(target.MinimumCompatibleRelease):
		// Every node the current status admits is also compatible with
		// the target state.
		return ActionSetWorking
	default:
		return ActionRestrict
	}
}

// Restricted returns the WORKING status that admits only nodes both
// current and target admit: the lower of the two versions and the higher
// of the two minimum compatible releases. When the versions' releases are
// equal, target's version is used.
func Restricted(current, target Status) Status {
	out := current
	out.State = StateWorking
	if !current.Version.Release.Less(target.Version.Release) {
		out.Version = target.Version
	}
	out.MinimumCompatibleRelease = maxRelease(current.MinimumCompatibleRelease, target.MinimumCompatibleRelease)
	return out
}
