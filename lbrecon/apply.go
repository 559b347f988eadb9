package lbrecon

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
)

// pass makes one pass from a fresh listing: it plans
// (for the steps' desired state, or with down for none), and applies what
// the plan allows now. Writes are recorded in the memory
// before and after each call, so that the next listing is read against
// them.
func (r *Reconciler) pass(ctx context.Context, listed []Object, listedAt listing, down bool) (*plan, error) {
	p, err := r.planFor(ctx, listed, listedAt, down)
	if err != nil {
		return nil, err
	}
	if r.budgetLeft(ctx) {
		r.ackDestructions(ctx) // else at a later pass: a successor would send them once more
	}
	if r.budgetLeft(ctx) {
		r.forgetEntries(ctx) // else at a later pass: a stale entry only holds a name longer
	}
	if p.converged() {
		return p, nil
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("scope", r.cfg.Scope)
	log.V(1).Info("applying plan", "create", len(p.Create), "update", len(p.Update), "destroy", len(p.Destroy),
		"deferred", len(p.Deferred), "adopt", len(p.Adopt), "repair", len(p.repair), "recreate", len(p.recreate),
		"pending", len(p.Pending), "unconfirmed", len(p.Unconfirmed), "blocked", p.Blocked)

	// A fence's refusal ends the pass: every later write carries the same
	// token.
	for _, phase := range []func(context.Context, *plan){r.repair, r.adopt, r.destroyNow, r.create, r.update} {
		if p.fence == nil {
			phase(ctx, p)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("lbrecon: %w", err)
	}
	return p, nil
}

// repair repairs failed objects in place, once per name.
func (r *Reconciler) repair(ctx context.Context, p *plan) {
	if len(p.repair) == 0 {
		return
	}
	rep := r.cfg.Engine.(Repairer)
	got, errs := r.parallel(ctx, p.repair, VerbRepair, rep.Repair)
	now := r.clock.Now()
	r.memMu.Lock()
	defer r.memMu.Unlock()
	for i, e := range errs {
		o := p.repair[i]
		switch {
		case p.fenced(e), p.unsent(e):
		case e == nil:
			logr.FromContextOrDiscard(ctx).Info("repairing failed object in place", "object", o.String())
			r.mem.failures[nameOf(o)]++
			r.mem.ackUpdate(withTags(got[i], o), now, r.horizonAfter(now))
			p.changed = true
		case errors.Is(e, ErrNotSupported):
			// Not an error: the next pass recreates it.
			r.mem.noRepair[o.Key()] = true
			p.changed = true
		default:
			p.failed(ctx, fmt.Errorf("lbrecon: repair %v: %w", o, e))
		}
	}
}

// adopt tags untagged objects the plan was about to create.
func (r *Reconciler) adopt(ctx context.Context, p *plan) {
	if len(p.Adopt) == 0 {
		return
	}
	_, errs := r.parallel(ctx, p.Adopt, VerbTag, func(ctx context.Context, o Object) (Object, error) {
		return o, r.cfg.Engine.Tag(ctx, o, []string{r.cfg.Tag})
	})
	now := r.clock.Now()
	r.memMu.Lock()
	defer r.memMu.Unlock()
	for i, e := range errs {
		o := p.Adopt[i].clone()
		if p.fenced(e) || p.unsent(e) {
			continue
		}
		if e != nil {
			p.failed(ctx, fmt.Errorf("lbrecon: adopt %v: %w", o, e))
			continue
		}
		o.Tags = append(o.Tags, r.cfg.Tag)
		r.mem.ackUpdate(o, now, r.horizonAfter(now))
		p.changed = true
	}
	logr.FromContextOrDiscard(ctx).Info("adopted untagged objects", "objects", describe(p.Adopt))
}

// destroyNow destroys the plan's current destructions, all at once: the
// plan only lets a parent go once a listing shows its children gone.
func (r *Reconciler) destroyNow(ctx context.Context, p *plan) {
	if len(p.Destroy) == 0 {
		return
	}
	for _, o := range p.recreate {
		logr.FromContextOrDiscard(ctx).Info("recreating failed object", "object", o.String())
	}
	if !r.budgetLeft(ctx) || !r.recordDestructions(ctx, p, p.Destroy) {
		return // nothing sent: the next call records and destroys
	}
	_, errs := r.parallel(ctx, p.Destroy, VerbDestroy, func(ctx context.Context, o Object) (Object, error) {
		return o, r.cfg.Engine.Destroy(ctx, o)
	})
	defer r.ackDestructions(ctx)
	now := r.clock.Now()
	r.memMu.Lock()
	defer r.memMu.Unlock()
	var failed []error
	for i, e := range errs {
		o := p.Destroy[i]
		switch {
		case p.fenced(e), p.unsent(e):
			r.mem.destroyed(o, destroyNotSent)
		case e == nil, errors.Is(e, ErrNotFound):
			r.mem.deletions[o.Key()] = &deletion{at: now}
			r.mem.destroyed(o, destroyAccepted)
			r.mem.dropAck(o.Key())
			if isRecreate(p, o) {
				r.mem.failures[nameOf(o)]++
			}
			p.changed = true
		case errors.Is(e, ErrConflict):
			// Still referenced, or changing: look again next pass.
			r.mem.destroyed(o, destroyNotSent)
			p.changed = true
		case isOnePass(ctx) && ctx.Err() == nil && retryable(e):
			r.mem.destroyed(o, destroyOutcomeOf(e))
			p.failed(ctx, fmt.Errorf("lbrecon: destroy %v: %w", o, e))
		default:
			r.mem.destroyed(o, destroyOutcomeOf(e))
			failed = append(failed, fmt.Errorf("%v: %w", o, e))
		}
	}
	if len(failed) > 0 {
		p.applyErr = append(p.applyErr, fmt.Errorf("%w (%d of %d): %w", ErrNotDestroyable, len(failed), len(p.Destroy), errors.Join(failed...)))
	}
}

// destroyOutcomeOf tells, for a failed Destroy call, whether it may have
// destroyed the object: a transient error, a timeout or a cancellation
// may have; a refusal (permanent, rate limited) has not.
func destroyOutcomeOf(err error) destroyOutcome {
	switch classify(err) {
	case OutcomeTransient, OutcomeTimeout, OutcomeCanceled:
		return destroyUnknown
	}
	return destroyNotSent
}

func isRecreate(p *plan, o Object) bool {
	for _, f := range p.recreate {
		if f.Key() == o.Key() {
			return true
		}
	}
	return false
}

// create creates the plan's objects. An intent is recorded before each
// call (in the Journal first, when there is one: nothing is sent until it
// is durable), so that a creation whose outcome is unknown holds its name
// until a listing shows the object, a listing made ListLag after the call
// does not, or ConfirmTimeout passes. An engine that implements
// [IdempotentCreator] gets the intent's token; a creation of unknown
// outcome is then sent again with the same token instead of holding its name.
func (r *Reconciler) create(ctx context.Context, p *plan) {
	if len(p.Create) == 0 {
		return
	}
	now := r.clock.Now()
	intents := make([]Intent, len(p.Create))
	tokens := make(map[nameKey]string, len(p.Create))
	r.memMu.Lock()
	for i, c := range p.Create {
		nk := nameOf(c)
		fp := SpecFingerprint(c.Spec)
		tok := ""
		if in, ok := r.mem.intents[nk]; ok && in.fp == fp {
			tok = in.token // the same creation, sent again
		}
		if tok == "" {
			tok = r.intentToken(c, fp, now)
		}
		tokens[nk] = tok
		intents[i] = Intent{Scope: r.cfg.Scope, Kind: c.Kind, Name: c.Name, Spec: fp, Token: tok, At: now}
	}
	r.memMu.Unlock()
	if !r.budgetLeft(ctx) {
		return // nothing recorded, nothing sent: the next call creates
	}
	if r.cfg.Journal != nil {
		if err := r.cfg.Journal.Record(ctx, intents); err != nil {
			// Nothing is sent that a successor could not recognise.
			if errors.Is(err, errNoTime) {
				return // the next call records and creates
			}
			p.failed(ctx, fmt.Errorf("lbrecon: record %d intents before creating: %w", len(intents), err))
			return
		}
	}
	r.memMu.Lock()
	for i, c := range p.Create {
		nk := nameOf(c)
		r.mem.intents[nk] = &intent{obj: c.clone(), at: now, fp: intents[i].Spec, token: intents[i].Token}
		if r.cfg.Journal != nil {
			r.mem.entries[nk] = intents[i]
		}
	}
	r.memMu.Unlock()
	got, errs := r.parallel(ctx, p.Create, VerbCreate, func(ctx context.Context, c Object) (Object, error) {
		return r.createOne(ctx, c, tokens[nameOf(c)])
	})
	now = r.clock.Now()
	r.memMu.Lock()
	defer r.memMu.Unlock()
	var failed []error
	for i, e := range errs {
		c := p.Create[i]
		nk := nameOf(c)
		if e != nil && !retryable(e) && classify(e) != OutcomeCanceled {
			r.mem.dropEntry(nk) // known not to have created anything
		}
		switch {
		case p.fenced(e):
			delete(r.mem.intents, nk) // refused before it left the process
		case p.unsent(e):
			delete(r.mem.intents, nk) // never sent
			r.mem.dropEntry(nk)
		case e == nil:
			delete(r.mem.intents, nk)
			delete(r.mem.conflicts, nk)
			if got[i].ID == "" {
				failed = append(failed, fmt.Errorf("%v: %w: the engine returned no ID", c, ErrInconsistent))
				continue
			}
			r.mem.ackCreate(withTags(got[i], c), now, r.horizonAfter(now))
			p.changed = true
		case errors.Is(e, ErrAlreadyExists):
			// The name is taken: look again; if our own old object holds
			// it, it is destroyed before the name is created again.
			delete(r.mem.intents, nk)
			r.mem.conflicts[nk] = true
			p.changed = true
		case errors.Is(e, ErrConflict):
			delete(r.mem.intents, nk)
			p.changed = true
		case classify(e) == OutcomeTransient || classify(e) == OutcomeTimeout || classify(e) == OutcomeCanceled:
			// The object may exist: the intent holds the name.
			err := fmt.Errorf("%v: outcome unknown, waiting for a listing: %w", c, e)
			p.changed = true
			if in, ok := r.mem.intents[nk]; ok {
				in.horizon = r.horizonAfter(now)
			}
			if isOnePass(ctx) && ctx.Err() == nil && retryable(e) {
				p.failed(ctx, fmt.Errorf("lbrecon: create %w", err))
				continue
			}
			failed = append(failed, err)
		default:
			delete(r.mem.intents, nk)
			r.mem.dropEntry(nk) // rate limited or refused: nothing created
			if isOnePass(ctx) && ctx.Err() == nil && retryable(e) {
				p.failed(ctx, fmt.Errorf("lbrecon: create %v: %w", c, e)) // rate limited: nothing created
				continue
			}
			failed = append(failed, fmt.Errorf("%v: %w", c, e))
		}
	}
	if len(failed) > 0 {
		p.applyErr = append(p.applyErr, fmt.Errorf("lbrecon: create %d of %d objects: %w", len(failed), len(p.Create), errors.Join(failed...)))
	}
}

// createOne sends one creation: with its idempotency token to an engine
// that takes one, else with Create. The error of a creation sent with a
// token is marked resendable: sending it again cannot create twice.
func (r *Reconciler) createOne(ctx context.Context, c Object, token string) (Object, error) {
	if ic, ok := r.cfg.Engine.(IdempotentCreator); ok && r.idempotency.Load() >= 0 {
		got, err := ic.CreateIdempotent(ctx, c, token)
		if !errors.Is(err, ErrNotSupported) {
			r.idempotency.CompareAndSwap(0, 1)
			if err != nil {
				err = resendable{err}
			}
			return got, err
		}
		r.idempotency.Store(-1) // nothing was sent: fall back
	}
	return r.cfg.Engine.Create(ctx, c)
}

// resendable marks the error of a creation sent with an idempotency
// token: Reconcile retries it like any other call, since the provider
// creates nothing the second time if the first call did create.
type resendable struct{ error }

func (e resendable) Unwrap() error { return e.error }

// update updates objects in place through the engine's Updater.
func (r *Reconciler) update(ctx context.Context, p *plan) {
	if len(p.Update) == 0 {
		return
	}
	up := r.cfg.Engine.(Updater)
	cur := make([]Object, len(p.Update))
	desired := make(map[Key]Object, len(p.Update))
	for i, u := range p.Update {
		cur[i] = u.Current
		desired[u.Current.Key()] = u.Desired
	}
	got, errs := r.parallel(ctx, cur, VerbUpdate, func(ctx context.Context, o Object) (Object, error) {
		return up.Update(ctx, o, desired[o.Key()].clone())
	})
	now := r.clock.Now()
	r.memMu.Lock()
	defer r.memMu.Unlock()
	for i, e := range errs {
		u := p.Update[i]
		switch {
		case p.fenced(e), p.unsent(e):
		case e == nil:
			o := got[i]
			if o.ID == "" {
				o = u.Current.clone()
				o.Spec = u.Desired.Spec
			}
			r.mem.ackUpdate(withTags(o, u.Current), now, r.horizonAfter(now))
			p.changed = true
		case errors.Is(e, ErrNotSupported):
			r.mem.noUpdate[u.Current.Key()] = true
			p.changed = true
		case errors.Is(e, ErrConflict), errors.Is(e, ErrNotFound):
			p.changed = true
		default:
			p.failed(ctx, fmt.Errorf("lbrecon: update %v: %w", u.Current, e))
		}
	}
}

// withTags returns got (an engine's answer) with Kind, Name and Tags filled
// from sent where the engine left them empty.
func withTags(got, sent Object) Object {
	got = got.clone()
	if got.Kind == "" {
		got.Kind = sent.Kind
	}
	if got.Name == "" {
		got.Name = sent.Name
	}
	if got.Tags == nil {
		got.Tags = append([]string(nil), sent.Tags...)
	}
	if got.Spec == nil {
		got.Spec = sent.Spec
	}
	return got
}
