package lbrecon

import (
	"cmp"
	"context"
	"slices"
)

// Step computes what to create and destroy for one kind of object.
type Step struct {
	// Kind is the kind of the objects this step manages; each step has its
	// own kind.
	Kind string
	// DependsOn lists the kinds this step's objects refer to. While any of
	// them still has objects to create, this step's creations wait (its
	// destructions do not). Nil means every earlier step, the strict order
	// of the original algorithm; an empty non-nil slice means none.
	DependsOn []string
	// Plan returns the objects to create and to destroy, given the observed
	// objects. obs holds the objects the reconciler owns or adopts, minus
	// those earlier steps destroy in the same plan. Objects to create carry
	// Kind, Name and Spec; objects to destroy are taken from obs. Plan must
	// not change anything and must not keep obs; it is called on the
	// reconciling goroutine, one step at a time.
	Plan func(ctx context.Context, obs *Observation) (create, destroy []Object, err error)
}

// Observation is a read-only view of observed objects, grouped by kind.
type Observation struct {
	byKind map[string][]Object
	byID   map[string]Object
}

// NewObservation groups objs by kind. It copies nothing: callers must not
// change objs afterwards.
func NewObservation(objs []Object) *Observation {
	o := &Observation{byKind: make(map[string][]Object), byID: make(map[string]Object, len(objs))}
	for _, obj := range objs {
		o.byKind[obj.Kind] = append(o.byKind[obj.Kind], obj)
		if obj.ID != "" {
			o.byID[obj.ID] = obj
		}
	}
	return o
}

// Objects returns the observed objects of kind. The slice must not be
// modified.
func (o *Observation) Objects(kind string) []Object { return o.byKind[kind] }

// ByID returns the observed object with identifier id.
func (o *Observation) ByID(id string) (Object, bool) {
	obj, ok := o.byID[id]
	return obj, ok
}

// without returns a view that lacks the objects with the given IDs.
func (o *Observation) without(ids map[string]bool) *Observation {
	if len(ids) == 0 {
		return o
	}
	n := &Observation{byKind: make(map[string][]Object, len(o.byKind)), byID: make(map[string]Object, len(o.byID))}
	for kind, objs := range o.byKind {
		kept := make([]Object, 0, len(objs))
		for _, obj := range objs {
			if !ids[obj.ID] {
				kept = append(kept, obj)
				n.byID[obj.ID] = obj
			}
		}
		n.byKind[kind] = kept
	}
	return n
}

// Diff matches desired objects to observed ones by name and spec
// ([SameSpec]). It returns the desired objects that have no match (to create)
// and the observed objects that match nothing (to destroy): undesired names,
// changed specs, and duplicates. Among duplicates it keeps an ok object over
// a pending one over a failed one, then the smallest ID. Desired names must be
// unique; a repeated desired name is matched once.
func Diff(desired, observed []Object) (create, destroy []Object) {
	byName := make(map[string][]Object, len(observed))
	for _, o := range observed {
		byName[o.Name] = append(byName[o.Name], o)
	}
	seen := make(map[string]bool, len(desired))
	for _, d := range desired {
		if seen[d.Name] {
			continue
		}
		seen[d.Name] = true
		cands := byName[d.Name]
		best := -1
		for i, c := range cands {
			if !SameSpec(d.Spec, c.Spec) {
				continue
			}
			if best < 0 || better(c, cands[best]) {
				best = i
			}
		}
		if best < 0 {
			create = append(create, d)
		}
		for i, c := range cands {
			if i != best {
				destroy = append(destroy, c)
			}
		}
		delete(byName, d.Name)
	}
	// Observed names nobody desires, in a stable order.
	rest := make([]Object, 0)
	for _, cands := range byName {
		rest = append(rest, cands...)
	}
	slices.SortFunc(rest, func(a, b Object) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID)) })
	return create, append(destroy, rest...)
}

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
