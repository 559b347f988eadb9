package lbrecon

import (
	"context"
	"time"
)

// GuardFunc decides whether a write may reach the provider. It is called
// before every Create, Destroy, Tag, Update and Repair with the call's
// context, verb and object, and returns an error to refuse the write.
// Hosts use it to pass a fencing token to a provider that supports
// conditional writes, or to refuse writes once leadership is lost; an error
// marked backoff.Permanent is not retried.
type GuardFunc func(ctx context.Context, verb Verb, obj Object) error

// Guard returns an engine that calls check before every write to e and
// forwards the optional interfaces: it always implements [Repairer],
// [Updater] and [IdempotentCreator], answering [ErrNotSupported] when e
// does not, which the reconciler takes as "recreate", "replace" and
// "create without a token", and [ListLagger], answering 0 (none declared)
// when e does not. Reads (List, Get) are not
// checked. A nil check lets every write through. [CheckToken] builds a
// check that compares the fencing token each call's context carries (see
// [WithToken]).
func Guard(e Engine, check GuardFunc) Engine {
	if check == nil {
		check = func(context.Context, Verb, Object) error { return nil }
	}
	return &guarded{e: e, check: check}
}

type guarded struct {
	e     Engine
	check GuardFunc
}

var (
	_ Repairer          = (*guarded)(nil)
	_ Updater           = (*guarded)(nil)
	_ IdempotentCreator = (*guarded)(nil)
	_ ListLagger        = (*guarded)(nil)
	_ ListingLagger     = (*guarded)(nil)
)

func (g *guarded) ListLag() time.Duration {
	if ll, ok := g.e.(ListLagger); ok {
		return ll.ListLag()
	}
	return 0
}

func (g *guarded) ListLagListings() int {
	if ll, ok := g.e.(ListingLagger); ok {
		return ll.ListLagListings()
	}
	return 0
}

func (g *guarded) CreateIdempotent(ctx context.Context, obj Object, token string) (Object, error) {
	ic, ok := g.e.(IdempotentCreator)
	if !ok {
		return Object{}, ErrNotSupported
	}
	if err := g.check(ctx, VerbCreate, obj); err != nil {
		return Object{}, err
	}
	return ic.CreateIdempotent(ctx, obj, token)
}

func (g *guarded) List(ctx context.Context, q Query) ([]Object, error) { return g.e.List(ctx, q) }

func (g *guarded) Get(ctx context.Context, obj Object) (Object, error) { return g.e.Get(ctx, obj) }

func (g *guarded) Create(ctx context.Context, obj Object) (Object, error) {
	if err := g.check(ctx, VerbCreate, obj); err != nil {
		return Object{}, err
	}
	return g.e.Create(ctx, obj)
}

func (g *guarded) Destroy(ctx context.Context, obj Object) error {
	if err := g.check(ctx, VerbDestroy, obj); err != nil {
		return err
	}
	return g.e.Destroy(ctx, obj)
}

func (g *guarded) Tag(ctx context.Context, obj Object, tags []string) error {
	if err := g.check(ctx, VerbTag, obj); err != nil {
		return err
	}
	return g.e.Tag(ctx, obj, tags)
}

func (g *guarded) Repair(ctx context.Context, obj Object) (Object, error) {
	r, ok := g.e.(Repairer)
	if !ok {
		return Object{}, ErrNotSupported
	}
	if err := g.check(ctx, VerbRepair, obj); err != nil {
		return Object{}, err
	}
	return r.Repair(ctx, obj)
}

func (g *guarded) Update(ctx context.Context, current, desired Object) (Object, error) {
	u, ok := g.e.(Updater)
	if !ok {
		return Object{}, ErrNotSupported
	}
	if err := g.check(ctx, VerbUpdate, current); err != nil {
		return Object{}, err
	}
	return u.Update(ctx, current, desired)
}
