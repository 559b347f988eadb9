package lbrecon

import "context"

// boundedJournal bounds every call to a [Journal] by CallTimeout on the
// clock, as engine calls are: a journal kept on a remote object (an
// annotation on an apiserver) must not hold a pass longer than the
// provider may.
type boundedJournal struct {
	j Journal
	r *Reconciler
}

func (b boundedJournal) Load(ctx context.Context) ([]Intent, error) {
	var out []Intent
	err := b.r.bounded(ctx, func(ctx context.Context) error {
		var err error
		out, err = b.j.Load(ctx)
		return err
	})
	return out, err
}

func (b boundedJournal) Record(ctx context.Context, intents []Intent) error {
	return b.r.bounded(ctx, func(ctx context.Context) error { return b.j.Record(ctx, intents) })
}

func (b boundedJournal) Forget(ctx context.Context, intents []Intent) error {
	return b.r.bounded(ctx, func(ctx context.Context) error { return b.j.Forget(ctx, intents) })
}
