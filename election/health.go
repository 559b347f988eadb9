package election

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/utils/clock"
)

// ErrLeaderStale is wrapped by the error of a HealthCheck whose candidate
// holds a term that has not ended although it is past its ValidUntil by
// more than the grace: the goroutines that end terms are stuck, or the
// process was stopped, and it may act as leader while another candidate
// leads.
var ErrLeaderStale = errors.New("election: leader past its ValidUntil")

// DefaultHealthCheckName is the name HealthCheck.Name returns, client-go's
// for its HealthzAdaptor.
const DefaultHealthCheckName = "leaderElection"

// HealthCheck is a leadership health check with the semantics of client-go's
// HealthzAdaptor: a candidate that holds a term whose context is still
// live although the term is past its ValidUntil by more than the grace is
// unhealthy; a candidate that does not lead, or leads within ValidUntil
// (+ grace), is healthy. The electors end a term at its ValidUntil by
// themselves, so an unhealthy report means that this did not happen in
// time: a wedged or starved process, which a liveness probe should restart.
//
// Its Check method has the shape of controller-runtime's healthz.Checker
// (func(*http.Request) error), and it is an http.Handler. It sends no
// request and is safe for concurrent use.
type HealthCheck struct {
	current func() Leadership // the term held now, or nil
	clock   clock.PassiveClock
	grace   time.Duration
}

// NewHealthCheck returns the leadership health check of a candidate whose
// current term current returns (nil when it holds none), judged on clk (nil
// means the real clock) with the given grace, the tolerance client-go's
// NewLeaderHealthzAdaptor(timeout) takes (its examples use 20s). A negative
// grace counts as zero. Both backends offer it as their HealthCheck method;
// an Elector of the host's own can use it too. current is called from
// Check, possibly concurrently, and must not block.
func NewHealthCheck(current func() Leadership, clk clock.PassiveClock, grace time.Duration) *HealthCheck {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &HealthCheck{current: current, clock: clk, grace: max(grace, 0)}
}

// Name returns DefaultHealthCheckName, as client-go's HealthzAdaptor does.
func (h *HealthCheck) Name() string { return DefaultHealthCheckName }

// Check returns nil when the candidate is healthy, and an error wrapping
// ErrLeaderStale when it holds a live term more than the grace past its
// ValidUntil. The request is not used and may be nil.
func (h *HealthCheck) Check(*http.Request) error {
	l := h.current()
	if l == nil || l.Context().Err() != nil {
		return nil // not leading
	}
	x, ok := l.(Expiring)
	if !ok {
		return nil
	}
	now := h.clock.Now()
	if late := now.Sub(x.ValidUntil()); late > h.grace {
		return fmt.Errorf("%w: term %d of %q is live %v after its ValidUntil (grace %v)", ErrLeaderStale, l.Token(), l.Identity(), late, h.grace)
	}
	return nil
}

// ServeHTTP implements http.Handler: 200 "ok" when healthy, 500 with the
// reason otherwise.
func (h *HealthCheck) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if err := h.Check(r); err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = fmt.Fprintf(w, "%s failed: %v\n", h.Name(), err)
		return
	}
	_, _ = fmt.Fprintln(w, "ok")
}

var _ http.Handler = (*HealthCheck)(nil)
