package election

import (
	"fmt"
	"net/http"

	"k8s.io/client-go/rest"
)

// GuardedConfig returns a copy of cfg whose clients pass every request
// through a write gate: a mutating request (any method but GET, HEAD and
// OPTIONS, so POST, PUT, PATCH and DELETE) fails with an error wrapping
// ErrNotLeader unless e holds a term that is valid at that moment (the
// leader flag is up and the clock is before the term's ValidUntil). Reads
// and watches always pass, so followers keep their caches warm.
//
// The gate is checked when a request is sent, not when the apiserver
// applies it: a write sent just before ValidUntil can land after it, up to
// one network delay later. The skew margin (LeaseDuration − RenewDeadline)
// is what covers that delay; for writes that must never land late, carry
// the term's Token in the object and compare it on the server side (a
// resourceVersion precondition on an object holding the highest token).
// Review-style POSTs (SubjectAccessReview, TokenReview, pods/exec) are
// gated too; send them through an ungated config.
//
// The elector's own client must not use a guarded config: it has to write
// the Lease while it does not lead.
func GuardedConfig(cfg *rest.Config, e *LeaseElector) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &writeGate{next: rt, e: e}
	})
	return c
}

// writeGate is the RoundTripper GuardedConfig installs.
type writeGate struct {
	next http.RoundTripper
	e    *LeaseElector
}

// RoundTrip implements http.RoundTripper.
func (g *writeGate) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return g.next.RoundTrip(req)
	}
	if !g.e.validNow() {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body even on error
		}
		return nil, fmt.Errorf("%w: %s %s refused by the write gate of %q", ErrNotLeader, req.Method, req.URL.Path, g.e.cfg.Identity)
	}
	return g.next.RoundTrip(req)
}

// validNow reports whether this candidate holds a term it may act on now.
func (e *LeaseElector) validNow() bool {
	t := e.current()
	return t != nil && t.validNow()
}
