package lbrecon

import (
	"errors"
	"fmt"
	"sync"

	"github.com/reconkit/reconkit/internal/leadership"
)

// ErrFenced is wrapped by a write a fence refused because its fencing token
// is below the token the fence holds (see [FenceError]). The reconciler
// stops the pass at the first such refusal and reports it once.
var ErrFenced = errors.New("lbrecon: fenced off")

// FenceError is the refusal of a fence that holds a higher token than the
// write's. Either a later leader wrote (this writer is deposed), or the
// token source went back (a Lease recreated by a client that counts from
// zero, an etcd backup restored under the apiserver): then no leader can
// write until an operator clears the fence, and the error says how. It
// wraps [ErrFenced] and the leadership-lost sentinel.
type FenceError struct {
	// Fence names the fence: where the highest token is kept.
	Fence string
	// Stored is the token the fence holds; Token is the refused write's.
	Stored, Token uint64
	// Clear tells an operator how to clear the fence.
	Clear string
}

func (e *FenceError) Error() string {
	s := fmt.Sprintf("fence %s holds token %d, above this writer's token %d: a later leader wrote (this one is deposed), "+
		"or the token source went back (a Lease recreated by an old client, a restored backup)", e.Fence, e.Stored, e.Token)
	if e.Clear != "" {
		s += fmt.Sprintf("; if no leader holds token %d or above, clear the fence: %s", e.Stored, e.Clear)
	}
	return s
}

// Unwrap returns [ErrFenced] and the one leadership-lost sentinel that
// election.ErrLeadershipLost and versiongate.ErrLeadershipLost are, so a
// host that branches on either learns of a refused writer the same way
// whichever package refused it.
func (e *FenceError) Unwrap() []error { return []error{ErrFenced, leadership.ErrLost} }

// Fence keeps, in memory, the highest fencing token that wrote through it,
// and refuses lower ones with a [*FenceError]. Its Admit method is the
// admit function of [CheckToken] for a host whose provider has no
// conditional writes. A host that keeps the highest token elsewhere (a
// provider's tag, an object's annotation) returns a *FenceError from its
// own admit function, so that the refusal is reported the same way. It is
// safe for concurrent use.
type Fence struct {
	name, clear string

	mu      sync.Mutex
	highest uint64
}

// NewFence returns a fence named name (for errors) that holds highest,
// with clear telling an operator how to clear it (for example "call
// Reset from the agent's admin endpoint", or "delete annotation X").
func NewFence(name string, highest uint64, clear string) *Fence {
	return &Fence{name: name, clear: clear, highest: highest}
}

// Admit lets token write and raises the fence to it when it is at least
// the highest token the fence holds; otherwise it returns a *FenceError.
func (f *Fence) Admit(token uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if token < f.highest {
		return &FenceError{Fence: f.name, Stored: f.highest, Token: token, Clear: f.clear}
	}
	f.highest = token
	return nil
}

// Highest returns the token the fence holds.
func (f *Fence) Highest() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.highest
}

// Reset sets the token the fence holds, also downwards: the operator's
// remedy once it is known that no leader holds a higher token.
func (f *Fence) Reset(token uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.highest = token
}
