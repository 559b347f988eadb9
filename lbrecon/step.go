package lbrecon

import (
	"cmp"
	"context"
	"slices"
)

// Step computes what to create, update and destroy for one kind of object.
type Step struct {
	// Kind is the kind of the objects this step manages; each step has its
	// own kind.
	Kind string
	// DependsOn lists the kinds this step's objects refer to. Nil and empty
	// both mean none: the step's objects refer to no other step's. A step
	// may only depend on earlier steps.
	DependsOn []string
	// Refs returns the keys of the objects an object of this step refers to
	// (its parents, of kinds in DependsOn). With it, an object is created
	// only once each of its parents is ok, and the rest of the step goes on
	// meanwhile; without it, the step's creations wait while any object of
	// a kind it depends on is still to be created, pending or unconfirmed.
	// Refs also confines the loss of make-before-break to the children of
	// a parent that goes away for good; without it, every object of the
	// step loses it while any parent goes.
	// An observed object whose parent is not in the listing is an
	// inconsistent answer: the reconciler returns [ErrInconsistent] and
	// changes nothing (with a declared lag, only once a listing the lag
	// later still misses the parent).
	Refs func(Object) []Key
	// Plan returns the changes for this step's kind, given the observed
	// objects. obs holds the objects the reconciler owns, minus those
	// earlier steps destroy in the same plan. Objects to create carry Kind,
	// Name and Spec; objects to destroy and update are taken from obs. Plan
	// must not change anything and must not keep obs; it is called on the
	// reconciling goroutine, one step at a time. [Diff] computes Changes
	// from desired and observed objects.
	Plan func(ctx context.Context, obs *Observation) (Changes, error)
}

// Changes is what one step wants done.
type Changes struct {
	// Create holds new objects (Kind, Name, Spec).
	Create []Object
	// Update holds observed objects whose mutable fields differ from the
	// desired ones: they are updated in place through [Updater], or
	// replaced (make-before-break) when the engine cannot.
	Update []Change
	// Destroy holds observed objects nobody wants.
	Destroy []Object
	// Break holds observed objects to destroy at once, without waiting for
	// the step's creations and updates to be in service: objects holding
	// something (a bind's address and port) that a desired object needs
	// and that they will not give up otherwise, because they are destroyed
	// anyway or because objects take each other's. Make-before-break is
	// given up for them; references are still respected.
	Break []Object
	// Wait holds observed objects that are ok but not complete yet: the
	// provider has still to assign an attribute the plan needs (a load
	// balancer's address, in [Object.Status]). They are reported as
	// [Plan.Pending], and the plan does not converge while any is left;
	// past [Config.PendingTimeout] they are reported with
	// [ErrPendingTimeout].
	Wait []Object
}

// Change pairs an observed object with the desired version of it.
type Change struct {
	Current, Desired Object
}

// Verdict is a step's comparison of an observed object with the desired
// object of the same name.
type Verdict int

// Verdicts of a comparison.
const (
	// UpToDate means the observed object is what is desired (fields the
	// provider defaults or adds are not differences).
	UpToDate Verdict = iota
	// Updatable means fields differ that can change in place.
	Updatable
	// Replace means fields differ that cannot change in place: a new
	// object is created and the old one destroyed once it is in service.
	Replace
)

// Compare compares a desired object with an observed one of the same kind
// and name. SameSpecCompare is the comparison [Diff] uses when none is given.
type Compare func(desired, observed Object) Verdict

// SameSpecCompare reports UpToDate when the specs are equal ([SameSpec])
// and Replace otherwise.
func SameSpecCompare(desired, observed Object) Verdict {
	if SameSpec(desired.Spec, observed.Spec) {
		return UpToDate
	}
	return Replace
}

// Observation is a read-only view of observed objects, grouped by kind.
type Observation struct {
	byKind map[string][]Object
	byKey  map[Key]Object
	known  map[Key]bool // every listed object, including those going away

	orphans map[Key]bool // listed objects whose parent, if not listed, is gone (horizon.go)
	stale   bool         // from a listing older than one already merged: nothing it shows is recorded (see Reconciler.fold)
}

// NewObservation groups objs by kind. It copies nothing: callers must not
// change objs afterwards.
func NewObservation(objs []Object) *Observation {
	o := &Observation{byKind: make(map[string][]Object), byKey: make(map[Key]Object, len(objs)), known: make(map[Key]bool, len(objs))}
	for _, obj := range objs {
		o.byKind[obj.Kind] = append(o.byKind[obj.Kind], obj)
		if obj.ID != "" {
			o.byKey[obj.Key()] = obj
			o.known[obj.Key()] = true
		}
	}
	return o
}

// Stale reports whether o comes from a listing that started before one
// the reconciler had already merged when o was made (a Check or Observe
// beside a pass): it shows an older state, and the reconciler recorded
// nothing of it. A step that remembers what it observes must ignore a
// stale observation, as the load balancer's own status does.
func (o *Observation) Stale() bool { return o.stale }

// Objects returns the observed objects of kind. The slice must not be
// modified.
func (o *Observation) Objects(kind string) []Object { return o.byKind[kind] }

// Get returns the observed object with key k.
func (o *Observation) Get(k Key) (Object, bool) {
	obj, ok := o.byKey[k]
	return obj, ok
}

// Known reports whether the listing showed an object with key k, including
// objects this plan or an earlier call is destroying, which Get and
// Objects leave out.
func (o *Observation) Known(k Key) bool { return o.known[k] }

// without returns a view that lacks the objects with the given keys; they
// stay known.
func (o *Observation) without(gone map[Key]bool) *Observation {
	if len(gone) == 0 {
		return o
	}
	n := &Observation{byKind: make(map[string][]Object, len(o.byKind)), byKey: make(map[Key]Object, len(o.byKey)), known: o.known, orphans: o.orphans, stale: o.stale}
	for kind, objs := range o.byKind {
		kept := make([]Object, 0, len(objs))
		for _, obj := range objs {
			if !gone[obj.Key()] {
				kept = append(kept, obj)
				n.byKey[obj.Key()] = obj
			}
		}
		n.byKind[kind] = kept
	}
	return n
}

// Diff matches desired objects to observed ones by name and compares them
// with cmp (nil means [SameSpecCompare]). A desired object with no observed
// object of its name is created. Among observed objects of one name it
// keeps the best up-to-date one (ok over pending over failed, then the
// smallest ID); failing that, the best updatable one is updated; every other
// object of the name is destroyed, and a replacement is created when none
// was kept. Observed names nobody desires are destroyed. Desired names must
// be unique; a repeated desired name is matched once.
func Diff(desired, observed []Object, cmp Compare) Changes {
	if cmp == nil {
		cmp = SameSpecCompare
	}
	byName := make(map[string][]Object, len(observed))
	for _, o := range observed {
		byName[o.Name] = append(byName[o.Name], o)
	}
	var ch Changes
	seen := make(map[string]bool, len(desired))
	for _, d := range desired {
		if seen[d.Name] {
			continue
		}
		seen[d.Name] = true
		cands := byName[d.Name]
		keep, update := -1, -1
		for i, c := range cands {
			switch cmp(d, c) {
			case UpToDate:
				if keep < 0 || better(c, cands[keep]) {
					keep = i
				}
			case Updatable:
				if update < 0 || better(c, cands[update]) {
					update = i
				}
			}
		}
		switch {
		case keep >= 0:
			update = -1
		case update >= 0:
			ch.Update = append(ch.Update, Change{Current: cands[update], Desired: d})
		default:
			ch.Create = append(ch.Create, d)
		}
		for i, c := range cands {
			if i != keep && i != update {
				ch.Destroy = append(ch.Destroy, c)
			}
		}
		delete(byName, d.Name)
	}
	// Observed names nobody desires, in a stable order.
	rest := make([]Object, 0)
	for _, cands := range byName {
		rest = append(rest, cands...)
	}
	slices.SortFunc(rest, func(a, b Object) int { return cmp2(a, b) })
	ch.Destroy = append(ch.Destroy, rest...)
	return ch
}

func cmp2(a, b Object) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID)) }

// better reports whether a is a better keeper than b among duplicates.
func better(a, b Object) bool {
	ra, rb := stateRank(a.State), stateRank(b.State)
	if ra != rb {
		return ra < rb
	}
	return a.ID < b.ID
}

func stateRank(s State) int {
	switch s {
	case StateOK:
		return 0
	case StatePending:
		return 1
	case StateFailed:
		return 3
	}
	return 2
}
