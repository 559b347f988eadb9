package lease

import (
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/rest"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/internal/term"
)

// GuardedConfig returns a copy of cfg whose clients pass every request
// through a write gate bound to one term, l: a mutating request (any method
// but GET, HEAD and OPTIONS, so POST, PUT, PATCH and DELETE) fails with an
// error wrapping election.ErrNotLeader unless l is valid at that moment (its context
// is live and, for a term that implements election.Expiring, the clock is before its
// ValidUntil). Reads and watches always pass.
//
// The gate belongs to the term, not to the elector: a client built for
// term N refuses writes for good once term N ended, even while the same
// candidate leads term N+1, so a goroutine left over from an earlier term
// cannot write in a later one. Build the guarded client at the start of
// each term (Run's lead function is the place) and let it go with the
// term. It works with a term of either backend.
//
// The gate is checked when a request is sent, not when the apiserver
// applies it: a write sent just before ValidUntil can land after it, up to
// one network delay later. The skew margin (LeaseDuration − RenewDeadline)
// is what covers that delay; for writes that must never land late, carry
// the term's election.Token in the object and compare it on the server side (a
// resourceVersion precondition on an object holding the highest token).
// Review-style POSTs (SubjectAccessReview, TokenReview, pods/exec) are
// gated too; send them through an ungated config.
//
// The elector's own client must not use a guarded config: it has to write
// the Lease while it does not lead.
func GuardedConfig(cfg *rest.Config, l election.Leadership) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &writeGate{next: rt, l: l}
	})
	return c
}

// writeGate is the RoundTripper GuardedConfig installs.
type writeGate struct {
	next http.RoundTripper
	l    election.Leadership
}

// RoundTrip implements http.RoundTripper.
func (g *writeGate) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return g.next.RoundTrip(req)
	}
	if !termValidNow(g.l) {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body even on error
		}
		return nil, fmt.Errorf("%w: %s %s refused by the write gate of term %d of %q", election.ErrNotLeader, req.Method, req.URL.Path, g.l.Token(), g.l.Identity())
	}
	return g.next.RoundTrip(req)
}

// termValidNow reports whether l may act now: its context is live and, if
// it expires, the clock (its elector's, for our terms) is before
// ValidUntil.
func termValidNow(l election.Leadership) bool {
	if l == nil {
		return false
	}
	if v, ok := l.(term.Validator); ok {
		return v.ValidNow()
	}
	if l.Context().Err() != nil {
		return false
	}
	if x, ok := l.(election.Expiring); ok {
		return time.Now().Before(x.ValidUntil())
	}
	return true
}

// validNow reports whether this candidate holds a term it may act on now.
func (e *Elector) validNow() bool {
	t := e.current()
	return t != nil && t.ValidNow()
}
