package term

// Validator is implemented by a term that knows, on its elector's own
// clock, whether it may act at this instant: context live, flag set, and
// before ValidUntil. The Kubernetes write gate asks it first and falls
// back to the context and election.Expiring on the real clock.
type Validator interface {
	ValidNow() bool
}
