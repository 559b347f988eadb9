// Package healthz serves named health checks as one endpoint, in the
// format of the Kubernetes components' /healthz.
//
// A [Checker] has the shape of controller-runtime's healthz.Checker,
// func(*http.Request) error, so the checks reconkit's packages expose fit
// as they are, as do a host's own and controller-runtime's (this package
// imports neither). The checks of reconkit's packages, each a method that
// returns a func(*http.Request) error:
//
//   - election: the electors' HealthCheck(grace).Check, with
//     election.DefaultHealthCheckName: a term live past its ValidUntil.
//   - nodestatus: NodeController.HeartbeatCheck(bound): no successful
//     heartbeat (lease renewal, or status write without leases) within
//     bound.
//   - versiongate: Gate.RecordCheck(grace): the node's release record not
//     valid (unpublished, or lost by its local deadline) for longer than
//     grace.
//   - checkpoint: Controller.TrialCheck(grace): a configuration trial
//     undecided past its duration plus grace. A rolled-back configuration
//     is not a failure of this check (see its documentation).
//
// [Handler] runs the checks in order on each request and answers 200 "ok"
// when all pass, or 500 with one line per check ("[+]name ok",
// "[-]name failed: reason") and "healthz check failed" when any fails.
// "?verbose" lists every check on success too; "?exclude=name" (repeatable)
// skips a check, and names that match no check are reported on a "warn:"
// line, as Kubernetes does. [Handler.Install] serves the handler on a
// ServeMux at a path and at the path with a trailing slash, and each check
// at path/<name> alone, as the Kubernetes components and
// controller-runtime serve /healthz/<name> (404 for a name no check has),
// so a probe can watch one check. A request for one check runs it
// whatever ?exclude= says, as theirs do: it never answers "ok" for a
// check that fails. Every HTTP method is answered alike, as
// controller-runtime's healthz does (a load balancer may probe with HEAD
// or POST).
//
// Where it differs from controller-runtime's healthz, on purpose: the
// reason of a failure is shown, on the aggregate path too, where
// controller-runtime writes "reason withheld" (mount the handler where
// those who may see it can reach it); a single check answers in the
// aggregate's format ("[-]name failed: reason", "healthz check failed")
// rather than "internal server error: reason", with the same status code;
// checks run in the order given rather than a map's; and a Handler with
// no checks answers "ok" without serving a "ping" check of its own.
//
// Checks run on the request's goroutine, one after the other, and get the
// request (its context ends when the client goes away); a check must not
// block for long. A Handler is safe for concurrent use.
package healthz
