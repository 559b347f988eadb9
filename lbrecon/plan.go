package lbrecon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Plan is what one pass would do, as computed by [Reconciler.Check].
type Plan struct {
	// Create holds the objects to create now, with the ownership tag set:
	// those whose parents are ok and whose names are free.
	Create []Object
	// Update holds objects to update in place ([Updater]).
	Update []Change
	// Destroy holds the objects to destroy now, children before parents.
	Destroy []Object
	// Deferred holds objects to destroy later: replaced objects kept until
	// their replacements are in service (make-before-break), and parents
	// kept until their children are gone.
	Deferred []Object
	// Adopt holds untagged objects whose kind, name and spec are exactly
	// those of an object to create: Reconcile tags them instead.
	Adopt []Object
	// Failed holds owned objects in the failed state.
	Failed []Object
	// Pending holds owned objects the provider is still working on.
	Pending []Object
	// Unconfirmed holds writes no listing has reflected yet: created or
	// updated objects not listed as updated, destroyed objects still listed,
	// and creations of unknown outcome (with no ID).
	Unconfirmed []Object
	// Blocked counts objects to create later, once their parents are ok or
	// their names are free.
	Blocked int
}

// Empty reports whether the plan has nothing to do and nothing to wait for,
// that is whether a listing confirms the desired state.
func (p Plan) Empty() bool {
	return len(p.Create)+len(p.Update)+len(p.Destroy)+len(p.Deferred)+len(p.Adopt)+len(p.Failed)+
		len(p.Pending)+len(p.Unconfirmed)+p.Blocked == 0
}

// plan is a Plan with what applying it needs.
type plan struct {
	Plan
	repair   []Object
	recreate []Object      // failed objects destroyed to be created again
	destroy  [][]Object    // by step: destroy now
	waiting  []Object      // pending and unconfirmed objects worth waiting for
	stuck    []error       // what waiting cannot fix
	changed  bool          // set by apply
	applyErr []error       // set by apply
	retry    []error       // set by apply in one pass: failures left to the next call
	hint     time.Duration // the largest retry-after hint among retry
	fence    error         // the first write a fence refused (ErrFenced): the pass stops
	deadline time.Time     // earliest time a wait should end (zero: none)
}

func (p *plan) converged() bool {
	return p.Empty() && len(p.stuck) == 0 && len(p.applyErr) == 0 && len(p.retry) == 0 && p.fence == nil
}

// fenced reports whether err is a fence's refusal, and keeps the first
// one, preferring a [*FenceError] over a write not sent because of it.
func (p *plan) fenced(err error) bool {
	if !errors.Is(err, ErrFenced) {
		return false
	}
	var fe *FenceError
	if p.fence == nil || (!errors.As(p.fence, &fe) && errors.As(err, &fe)) {
		p.fence = err
	}
	return true
}

// unsent reports whether err is the result of a call one pass did not
// send for lack of time (errNoTime): the next call makes it.
func (p *plan) unsent(err error) bool { return errors.Is(err, errNoTime) }

// failed records a failed call: in one pass (see onePass), a failure a
// wait may cure is left to the host's next call; every other is an error
// of the pass.
func (p *plan) failed(ctx context.Context, err error) {
	if isOnePass(ctx) && ctx.Err() == nil && retryable(err) {
		p.retry = append(p.retry, err)
		p.hint = max(p.hint, retryAfter(err))
		return
	}
	p.applyErr = append(p.applyErr, err)
}

func (p *plan) err() error {
	return errors.Join(append(append([]error{p.fence}, p.stuck...), p.applyErr...)...)
}

func (p *plan) public() Plan { return p.Plan }

func (p *plan) deadlineAt() (time.Time, bool) { return p.deadline, !p.deadline.IsZero() }

func (p *plan) deadlineBefore(t time.Time) {
	if p.deadline.IsZero() || t.Before(p.deadline) {
		p.deadline = t
	}
}

// planFor merges a listing into the memory and computes the plan: for the
// steps' desired state, or with down for a teardown. A listing that
// started before one already merged changes nothing (see fold).
func (r *Reconciler) planFor(ctx context.Context, listed []Object, listedAt listing, down bool) (*plan, error) {
	r.memMu.Lock()
	defer r.memMu.Unlock()
	v, done, err := r.fold(listed, listedAt)
	if err != nil {
		return nil, err
	}
	defer done()
	return r.compute(ctx, v, down)
}

// compute runs the steps over a view. Called with memMu held.
func (r *Reconciler) compute(ctx context.Context, v *view, down bool) (*plan, error) {
	m := &r.mem
	n := len(r.cfg.Steps)
	p := &plan{destroy: make([][]Object, n)}

	// Two owned objects with one name and one spec: within the lag an
	// answer the reconciler cannot act on safely; past it, duplicates.
	extra, err := r.duplicates(v)
	if err != nil {
		return nil, err
	}

	obs := v.observation()
	_, canRepair := r.cfg.Engine.(Repairer)
	_, canUpdate := r.cfg.Engine.(Updater)
	gone := make(map[Key]bool)
	for _, o := range extra {
		gone[o.Key()] = true // planned from the one kept
	}
	for _, o := range v.owned {
		switch o.State {
		case StateOK:
		case StateFailed:
			if down {
				break // destroyed with the rest, neither repaired nor recreated
			}
			p.Failed = append(p.Failed, o)
			nk := nameOf(o)
			switch used := m.failures[nk]; {
			case used >= r.cfg.FailureBudget:
				p.stuck = append(p.stuck, fmt.Errorf("%w: %v failed again after %d repairs or recreations", ErrResourceFailed, o, used))
			case canRepair && used == 0 && !m.noRepair[o.Key()]:
				p.repair = append(p.repair, o)
			default:
				p.recreate = append(p.recreate, o)
				gone[o.Key()] = true
			}
		default:
			since := m.pendingSince[o.Key()]
			if end := since.Add(r.cfg.PendingTimeout); !v.now.Before(end) {
				p.stuck = append(p.stuck, fmt.Errorf("%w: %v pending since %v", ErrPendingTimeout, o, since.Format(time.RFC3339)))
			} else {
				p.Pending = append(p.Pending, o)
				p.waiting = append(p.waiting, o)
				p.deadlineBefore(end)
			}
		}
	}
	for _, o := range v.unconfirmed {
		p.Unconfirmed = append(p.Unconfirmed, o)
		p.waiting = append(p.waiting, o)
		p.deadlineBefore(m.ackedAt(o).Add(r.cfg.ConfirmTimeout))
	}
	for _, o := range v.deleting {
		p.Unconfirmed = append(p.Unconfirmed, o)
		p.waiting = append(p.waiting, o)
		p.deadlineBefore(m.deletions[o.Key()].at.Add(r.cfg.ConfirmTimeout))
	}
	for nk := range v.intended {
		in := m.intents[nk]
		p.Unconfirmed = append(p.Unconfirmed, in.obj)
		p.waiting = append(p.waiting, in.obj)
		p.deadlineBefore(in.at.Add(r.cfg.ConfirmTimeout))
	}

	// Run the steps, each on the view its predecessors leave.
	view := obs.without(gone)
	changes := make([]Changes, n)
	breakNow := make(map[Key]bool) // Changes.Break: destroyed without make-before-break
	for i, st := range r.cfg.Steps {
		plan := st.Plan
		if down {
			plan = r.teardownPlan(st)
		}
		ch, err := plan(ctx, view)
		if err != nil {
			return nil, fmt.Errorf("lbrecon: step %q: %w", st.Kind, err)
		}
		for _, c := range ch.Create {
			if c.Kind != st.Kind || c.Name == "" {
				return nil, fmt.Errorf("lbrecon: step %q wants to create %v: kind must be %q and name non-empty", st.Kind, c, st.Kind)
			}
		}
		for _, d := range ch.Break {
			breakNow[d.Key()] = true
		}
		ch.Destroy = append(ch.Destroy, ch.Break...)
		for _, d := range ch.Destroy {
			if _, ok := view.Get(d.Key()); !ok || d.Kind != st.Kind {
				return nil, fmt.Errorf("lbrecon: step %q wants to destroy %v, which is not an observed object of its kind", st.Kind, d)
			}
		}
		var updates []Change
		for _, u := range ch.Update {
			if _, ok := view.Get(u.Current.Key()); !ok || u.Current.Kind != st.Kind || u.Desired.Name != u.Current.Name {
				return nil, fmt.Errorf("lbrecon: step %q wants to update %v, which is not an observed object of its kind and name", st.Kind, u.Current)
			}
			if canUpdate && !m.noUpdate[u.Current.Key()] {
				updates = append(updates, u)
				continue
			}
			// Replace: create first, destroy once the new one serves.
			ch.Create = append(ch.Create, u.Desired)
			ch.Destroy = append(ch.Destroy, u.Current)
		}
		ch.Update = updates
		for _, w := range ch.Wait {
			if _, ok := view.Get(w.Key()); !ok || w.Kind != st.Kind {
				return nil, fmt.Errorf("lbrecon: step %q waits for %v, which is not an observed object of its kind", st.Kind, w)
			}
			since, ok := m.waitSince[w.Key()]
			if !ok {
				since = v.now
				m.waitSince[w.Key()] = since
			}
			if end := since.Add(r.cfg.PendingTimeout); !v.now.Before(end) {
				p.stuck = append(p.stuck, fmt.Errorf("%w: %v waiting for the provider since %v", ErrPendingTimeout, w, since.Format(time.RFC3339)))
				continue
			}
			p.Pending = append(p.Pending, w)
			p.waiting = append(p.waiting, w)
			p.deadlineBefore(since.Add(r.cfg.PendingTimeout))
		}
		changes[i] = ch
		if len(ch.Destroy) > 0 {
			for _, d := range ch.Destroy {
				gone[d.Key()] = true
			}
			view = obs.without(gone)
		}
	}
	for _, o := range p.recreate {
		i := r.stepOf[o.Kind]
		changes[i].Destroy = append(changes[i].Destroy, o)
	}
	for _, o := range extra {
		i := r.stepOf[o.Kind]
		changes[i].Destroy = append(changes[i].Destroy, o)
	}

	// Creations: adopt exact untagged matches; hold names of unknown
	// outcome and names still taken by a failed object; wait for parents.
	recreating := make(map[nameKey]bool, len(p.recreate))
	for _, o := range p.recreate {
		recreating[nameOf(o)] = true
	}
	outstanding := make([]bool, n) // the step still has objects to bring into service
	notReady := make([]bool, n)    // the step has objects to create, pending or unconfirmed
	for _, o := range p.waiting {
		if i, ok := r.stepOf[o.Kind]; ok {
			outstanding[i], notReady[i] = true, true
		}
	}
	for i, st := range r.cfg.Steps {
		ch := changes[i]
		if len(ch.Create) > 0 || len(ch.Update) > 0 {
			outstanding[i], notReady[i] = true, true
		}
		for _, c := range ch.Create {
			nk := nameOf(c)
			if k := slices.IndexFunc(v.untagged, func(u Object) bool {
				return u.Kind == c.Kind && u.Name == c.Name && SameSpec(u.Spec, c.Spec)
			}); k >= 0 {
				p.Adopt = append(p.Adopt, v.untagged[k])
				continue
			}
			if (v.intended[nk] && !r.resend(m.intents[nk], c)) || recreating[nk] || r.blocked(st, i, c, view, notReady) {
				p.Blocked++
				continue
			}
			c = c.clone()
			c.ID, c.State = "", 0
			if !c.HasTag(r.cfg.Tag) {
				c.Tags = append(c.Tags, r.cfg.Tag)
			}
			p.Create = append(p.Create, c)
		}
		for _, u := range ch.Update {
			if r.blocked(st, i, u.Desired, view, notReady) {
				p.Blocked++
				continue
			}
			p.Update = append(p.Update, u)
		}
	}

	// Destructions. A step's destructions wait while its dependents still
	// destroy or delete children (references), and, make-before-break,
	// while the step still brings objects into service, unless the object
	// failed, its name is needed by a creation the engine refused, or a
	// parent of its goes away for good.
	childGoing := make([]bool, n)
	for _, objs := range [][]Object{v.deleting, v.resend} {
		for _, o := range objs {
			for _, j := range r.deps[r.stepOf[o.Kind]] {
				childGoing[j] = true
			}
		}
	}
	removal := make([]bool, n)    // the step destroys objects nobody replaces
	leaving := make(map[Key]bool) // those objects: their children cannot wait for a replacement
	for i := range r.cfg.Steps {
		live := make(map[string]bool)
		for _, o := range view.Objects(r.cfg.Steps[i].Kind) {
			live[o.Name] = true
		}
		for _, c := range changes[i].Create {
			live[c.Name] = true
		}
		for _, d := range changes[i].Destroy {
			if !live[d.Name] || recreating[nameOf(d)] {
				removal[i] = true
				leaving[d.Key()] = true
			}
		}
		if len(changes[i].Destroy) > 0 {
			for _, j := range r.deps[i] {
				childGoing[j] = true
			}
		}
	}
	for i := n - 1; i >= 0; i-- {
		st := r.cfg.Steps[i]
		kindGoes := slices.ContainsFunc(r.deps[i], func(j int) bool { return removal[j] })
		for _, d := range changes[i].Destroy {
			// Make-before-break is given up only for the children of the
			// parent that goes; without Refs the parent is not known, and
			// the whole dependent kind gives it up.
			parentGoes := kindGoes
			if st.Refs != nil {
				parentGoes = slices.ContainsFunc(st.Refs(d), func(k Key) bool { return leaving[k] })
			}
			switch {
			case childGoing[i]:
				p.Deferred = append(p.Deferred, d)
			case recreating[nameOf(d)] || m.conflicts[nameOf(d)] || breakNow[d.Key()] || parentGoes || !outstanding[i]:
				p.destroy[i] = append(p.destroy[i], d)
				p.Destroy = append(p.Destroy, d)
			default:
				p.Deferred = append(p.Deferred, d)
			}
		}
	}
	// Destructions a predecessor journaled, of unknown outcome, are
	// sent again (unless the plan destroys the object anyway, now or
	// later): the object may be deleting, or still in service.
	for _, o := range v.resend {
		planned := func(d Object) bool { return d.Key() == o.Key() }
		if !slices.ContainsFunc(p.Destroy, planned) && !slices.ContainsFunc(p.Deferred, planned) {
			p.Destroy = append(p.Destroy, o)
		}
	}
	return p, nil
}

// duplicates returns the owned objects of v to destroy as duplicates: of
// two or more with one name and one spec, all but the one kept. Within the
// lag such a listing is errDuplicateListed (one of them may be an object
// someone else deleted, shown by a lagging replica); once every one of
// them was listed when that answer set the lag horizon (see lagging) and
// is listed again at a listing past it, they all exist. The one kept is
// the one listed children refer to (its children are not orphaned), else
// the one with the lowest ID (shorter first, then in byte order). The
// memory cannot tell which one this reconciler created: a creation is
// confirmed, and forgotten, by the first listing past its horizon, which
// comes no later than the one that settles a duplicate listed with it;
// and the journal holds names, not IDs. Called with memMu held.
func (r *Reconciler) duplicates(v *view) ([]Object, error) {
	type group struct{ objs []Object }
	var groups []*group
	byName := make(map[nameKey][]*group, len(v.owned))
	for _, o := range v.owned {
		nk := nameOf(o)
		i := slices.IndexFunc(byName[nk], func(g *group) bool { return SameSpec(g.objs[0].Spec, o.Spec) })
		if i < 0 {
			g := &group{objs: []Object{o}}
			byName[nk] = append(byName[nk], g)
			groups = append(groups, g)
			continue
		}
		g := byName[nk][i]
		for _, s := range g.objs {
			if !v.listed[s.Key()] || !v.listed[o.Key()] || !v.settled(s.Key()) || !v.settled(o.Key()) {
				return nil, fmt.Errorf("%w: %v and %v have one name and one spec", errDuplicateListed, s, o)
			}
		}
		g.objs = append(g.objs, o)
	}
	var referred map[Key]bool
	var extra []Object
	for _, g := range groups {
		if len(g.objs) < 2 {
			continue
		}
		if referred == nil {
			referred = r.referred(v)
		}
		keep := slices.MinFunc(g.objs, func(a, b Object) int {
			if c := cmpTrue(referred[a.Key()], referred[b.Key()]); c != 0 {
				return c
			}
			if c := cmp.Compare(len(a.ID), len(b.ID)); c != 0 {
				return c
			}
			return strings.Compare(a.ID, b.ID)
		})
		for _, o := range g.objs {
			if o.Key() != keep.Key() {
				extra = append(extra, o)
			}
		}
	}
	return extra, nil
}

// referred returns the keys of the objects that listed owned objects of v
// refer to (Step.Refs).
func (r *Reconciler) referred(v *view) map[Key]bool {
	out := make(map[Key]bool)
	for _, o := range v.owned {
		i, ok := r.stepOf[o.Kind]
		if !ok || !v.listed[o.Key()] || r.cfg.Steps[i].Refs == nil {
			continue
		}
		for _, k := range r.cfg.Steps[i].Refs(o) {
			out[k] = true
		}
	}
	return out
}

// cmpTrue orders true before false.
func cmpTrue(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// resend reports whether the creation of intent in is sent again as c: the
// engine has answered a CreateIdempotent (it takes idempotency tokens)
// and c is the same creation.
func (r *Reconciler) resend(in *intent, c Object) bool {
	return r.idempotency.Load() > 0 && in != nil && in.token != "" && in.fp == SpecFingerprint(c.Spec)
}

// blocked reports whether c must wait: a parent it refers to is not ok
// (with Step.Refs), or a kind it depends on still has objects to create,
// pending or unconfirmed (without).
func (r *Reconciler) blocked(st Step, i int, c Object, view *Observation, notReady []bool) bool {
	if st.Refs == nil {
		return slices.ContainsFunc(r.deps[i], func(j int) bool { return notReady[j] })
	}
	for _, k := range st.Refs(c) {
		o, ok := view.Get(k)
		if !ok || o.State != StateOK {
			return true
		}
	}
	return false
}

// ackedAt returns when o's unconfirmed ack (creation or update) was made.
func (m *memory) ackedAt(o Object) time.Time {
	if a := m.ackOf(o.Key()); a != nil {
		return a.at
	}
	return time.Time{}
}

// describe lists objects for errors and logs.
func describe(objs []Object) string {
	s := make([]string, 0, len(objs))
	for _, o := range objs {
		s = append(s, o.String())
	}
	slices.Sort(s)
	return strings.Join(s, ", ")
}
