package lbrecon

import (
	"context"
	"errors"
	"fmt"

	"github.com/reconkit/reconkit/backoff"
)

// ErrNoToken is wrapped by a write that [CheckToken] refuses because its
// context carries no fencing token.
var ErrNoToken = errors.New("lbrecon: no fencing token in the context")

type tokenKey struct{}

// WithToken returns a copy of ctx that carries a fencing token, such as the
// Token of the leadership term the host reconciles in. The reconciler
// passes the context given to Reconcile, ReconcileOnce, Teardown,
// TeardownOnce, Check and Observe (or one derived from it) to every engine
// call, so an engine reads the token with [TokenFrom] and sends it with
// each write to a provider that supports conditional writes, and a [Guard]
// built with [CheckToken] compares it before the write leaves the process.
func WithToken(ctx context.Context, token uint64) context.Context {
	return context.WithValue(ctx, tokenKey{}, token)
}

// TokenFrom returns the fencing token [WithToken] put in ctx, and whether
// there is one.
func TokenFrom(ctx context.Context) (token uint64, ok bool) {
	token, ok = ctx.Value(tokenKey{}).(uint64)
	return token, ok
}

// CheckToken returns a [GuardFunc] that refuses every write whose context
// carries no fencing token, with a permanent error wrapping [ErrNoToken],
// and otherwise passes the token to admit. admit compares it with the
// newest token the host or the provider knows and returns an error to
// refuse the write: a [*FenceError] when the fence holds a higher token
// ([Fence.Admit] is such a function). Every refusal is permanent, since a
// stale token does not get fresher, and names the refused write. The
// reconciler stops a pass at the first write refused with [ErrFenced] and
// returns that refusal once, not once per write. admit is called
// concurrently, from the reconciler's workers.
func CheckToken(admit func(token uint64) error) GuardFunc {
	return func(ctx context.Context, verb Verb, obj Object) error {
		token, ok := TokenFrom(ctx)
		if !ok {
			return backoff.Permanent(fmt.Errorf("%w: %s %v", ErrNoToken, verb, obj))
		}
		if err := admit(token); err != nil {
			return backoff.Permanent(fmt.Errorf("lbrecon: %s %v refused: %w", verb, obj, err))
		}
		return nil
	}
}
