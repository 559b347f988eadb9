package lbrecontest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/lbrecon"
)

// ErrInjected is wrapped by the errors of injected faults.
var ErrInjected = errors.New("lbrecontest: injected fault")

// ErrCrashed is wrapped by Create when a [Engine.CrashBeforeTag] fault made
// it create the object without its tags.
var ErrCrashed = errors.New("lbrecontest: crashed between create and tag")

// RateLimitError is returned by rate-limited calls. Its RetryAfter method is
// the hint the reconciler honours.
type RateLimitError struct{ After time.Duration }

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("lbrecontest: rate limited, retry after %v", e.After)
}

// RetryAfter returns how long to wait before the next call.
func (e *RateLimitError) RetryAfter() time.Duration { return e.After }

// Config configures an [Engine].
type Config struct {
	// Clock measures latency and pending periods; nil means the real clock.
	Clock clock.Clock
	// Latency is how long every call takes.
	Latency time.Duration
	// Pending is how long a created or repaired object stays pending.
	Pending time.Duration
	// Repair makes the engine repair failed objects in place; without it,
	// Repair returns an error wrapping lbrecon.ErrNotSupported.
	Repair bool
	// NothingTagged makes List fail with an error wrapping
	// lbrecon.ErrNotFound when no object carries the tag, like providers that
	// answer an empty tag query with an error.
	NothingTagged bool
}

type object struct {
	lbrecon.Object
	readyAt time.Time
	fails   bool // turns failed instead of ok at readyAt
}

type fault struct {
	verb  lbrecon.Verb
	match func(lbrecon.Object) bool
	left  int // <0: forever
	apply func(*Engine, lbrecon.Object) error
}

// Engine is an in-memory [lbrecon.Engine] and [lbrecon.Repairer]. It is
// safe for concurrent use.
type Engine struct {
	cfg   Config
	clock clock.Clock

	mu     sync.Mutex
	objs   map[string]*object
	nextID int
	calls  map[lbrecon.Verb]int
	faults []*fault
	turn   []*fault // objects created while these match end failed
}

var (
	_ lbrecon.Engine   = (*Engine)(nil)
	_ lbrecon.Repairer = (*Engine)(nil)
)

// New returns an empty engine.
func New(cfg Config) *Engine {
	c := cfg.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	return &Engine{cfg: cfg, clock: c, objs: make(map[string]*object), calls: make(map[lbrecon.Verb]int)}
}

// Calls returns the number of calls made so far, by verb.
func (e *Engine) Calls() map[lbrecon.Verb]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.calls)
}

// TotalCalls returns the number of calls made so far.
func (e *Engine) TotalCalls() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, c := range e.calls {
		n += c
	}
	return n
}

// ResetCalls sets every call counter back to zero.
func (e *Engine) ResetCalls() {
	e.mu.Lock()
	defer e.mu.Unlock()
	clear(e.calls)
}

// Objects returns a copy of every stored object, with its current state,
// sorted by ID.
func (e *Engine) Objects() []lbrecon.Object {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	out := make([]lbrecon.Object, 0, len(e.objs))
	for _, o := range e.objs {
		out = append(out, e.view(o, now))
	}
	slices.SortFunc(out, func(a, b lbrecon.Object) int { return compareIDs(a.ID, b.ID) })
	return out
}

// Put stores obj as it is, outside the API (no latency, not counted), and
// returns it with its ID. An empty ID gets a fresh one; an empty state is
// ok.
func (e *Engine) Put(obj lbrecon.Object) lbrecon.Object {
	e.mu.Lock()
	defer e.mu.Unlock()
	if obj.ID == "" {
		obj.ID = e.newID()
	}
	if obj.State == 0 {
		obj.State = lbrecon.StateOK
	}
	obj.Tags = slices.Clone(obj.Tags)
	e.objs[obj.ID] = &object{Object: obj}
	return obj
}

// Delete removes the object with id outside the API, and reports whether
// there was one.
func (e *Engine) Delete(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.objs[id]
	delete(e.objs, id)
	return ok
}

// SetState sets the state of the object with id outside the API.
func (e *Engine) SetState(id string, s lbrecon.State) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	o, ok := e.objs[id]
	if ok {
		o.State, o.readyAt, o.fails = s, time.Time{}, false
	}
	return ok
}

// FailCreate makes the next n creations of objects matching match (nil
// matches all; n < 0 means every one) fail with err, creating nothing. A nil
// err means a transient error wrapping ErrInjected.
func (e *Engine) FailCreate(match func(lbrecon.Object) bool, n int, err error) {
	if err == nil {
		err = fmt.Errorf("%w: create failed", ErrInjected)
	}
	e.inject(lbrecon.VerbCreate, match, n, func(*Engine, lbrecon.Object) error { return err })
}

// CrashBeforeTag makes the next n matching creations create the object
// without its tags and then fail with ErrCrashed, as a client that crashed
// between creating and tagging would leave it.
func (e *Engine) CrashBeforeTag(match func(lbrecon.Object) bool, n int) {
	e.inject(lbrecon.VerbCreate, match, n, func(e *Engine, obj lbrecon.Object) error {
		obj.Tags = nil
		e.store(obj)
		return ErrCrashed
	})
}

// TurnFailed makes the next n matching objects created or repaired end their
// pending period failed instead of ok.
func (e *Engine) TurnFailed(match func(lbrecon.Object) bool, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.turn = append(e.turn, &fault{match: match, left: n})
}

// FailDestroy makes the next n matching destructions fail with a transient
// error, destroying nothing.
func (e *Engine) FailDestroy(match func(lbrecon.Object) bool, n int) {
	e.inject(lbrecon.VerbDestroy, match, n, func(*Engine, lbrecon.Object) error {
		return fmt.Errorf("%w: destroy failed", ErrInjected)
	})
}

// RateLimit makes the next n calls of verb fail with a [RateLimitError]
// asking to wait after.
func (e *Engine) RateLimit(verb lbrecon.Verb, n int, after time.Duration) {
	e.inject(verb, nil, n, func(*Engine, lbrecon.Object) error { return &RateLimitError{After: after} })
}

func (e *Engine) inject(verb lbrecon.Verb, match func(lbrecon.Object) bool, n int, apply func(*Engine, lbrecon.Object) error) {
	if n == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults = append(e.faults, &fault{verb: verb, match: match, left: n, apply: apply})
}

// take consumes a matching fault, if any. Called with e.mu held.
func take(list []*fault, verb lbrecon.Verb, obj lbrecon.Object) *fault {
	for _, f := range list {
		if f.left == 0 || (f.verb != "" && f.verb != verb) || (f.match != nil && !f.match(obj)) {
			continue
		}
		if f.left > 0 {
			f.left--
		}
		return f
	}
	return nil
}

// begin counts the call, waits the latency and returns the fault to apply.
func (e *Engine) begin(ctx context.Context, verb lbrecon.Verb, obj lbrecon.Object) (*fault, error) {
	e.mu.Lock()
	e.calls[verb]++
	e.mu.Unlock()
	if e.cfg.Latency > 0 {
		t := e.clock.NewTimer(e.cfg.Latency)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C():
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return take(e.faults, verb, obj), nil
}

// List implements lbrecon.Engine.
func (e *Engine) List(ctx context.Context, q lbrecon.Query) ([]lbrecon.Object, error) {
	f, err := e.begin(ctx, lbrecon.VerbList, lbrecon.Object{})
	if err != nil {
		return nil, err
	}
	if f != nil {
		return nil, f.apply(e, lbrecon.Object{})
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	var out []lbrecon.Object
	tagged := 0
	for _, o := range e.objs {
		switch {
		case o.HasTag(q.Tag):
			tagged++
		case len(o.Tags) == 0:
		default:
			continue
		}
		out = append(out, e.view(o, now))
	}
	if tagged == 0 && e.cfg.NothingTagged {
		return nil, fmt.Errorf("lbrecontest: 422 nothing tagged with %q: %w", q.Tag, lbrecon.ErrNotFound)
	}
	slices.SortFunc(out, func(a, b lbrecon.Object) int { return compareIDs(a.ID, b.ID) })
	return out, nil
}

// Get implements lbrecon.Engine.
func (e *Engine) Get(ctx context.Context, obj lbrecon.Object) (lbrecon.Object, error) {
	f, err := e.begin(ctx, lbrecon.VerbGet, obj)
	if err != nil {
		return lbrecon.Object{}, err
	}
	if f != nil {
		return lbrecon.Object{}, f.apply(e, obj)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	o, ok := e.objs[obj.ID]
	if !ok || o.Kind != obj.Kind {
		return lbrecon.Object{}, fmt.Errorf("lbrecontest: get %v: %w", obj, lbrecon.ErrNotFound)
	}
	return e.view(o, e.clock.Now()), nil
}

// Create implements lbrecon.Engine: it applies obj.Tags as part of creation.
func (e *Engine) Create(ctx context.Context, obj lbrecon.Object) (lbrecon.Object, error) {
	f, err := e.begin(ctx, lbrecon.VerbCreate, obj)
	if err != nil {
		return lbrecon.Object{}, err
	}
	if f != nil {
		return lbrecon.Object{}, f.apply(e, obj)
	}
	return e.store(obj), nil
}

// store creates obj, pending for the configured period.
func (e *Engine) store(obj lbrecon.Object) lbrecon.Object {
	e.mu.Lock()
	defer e.mu.Unlock()
	obj.ID = e.newID()
	obj.Tags = slices.Clone(obj.Tags)
	o := &object{Object: obj}
	e.provision(o)
	e.objs[obj.ID] = o
	return e.view(o, e.clock.Now())
}

// provision starts o's pending period. Called with e.mu held.
func (e *Engine) provision(o *object) {
	o.State = lbrecon.StatePending
	o.readyAt = e.clock.Now().Add(e.cfg.Pending)
	o.fails = take(e.turn, "", o.Object) != nil
}

// Destroy implements lbrecon.Engine.
func (e *Engine) Destroy(ctx context.Context, obj lbrecon.Object) error {
	f, err := e.begin(ctx, lbrecon.VerbDestroy, obj)
	if err != nil {
		return err
	}
	if f != nil {
		return f.apply(e, obj)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if o, ok := e.objs[obj.ID]; !ok || o.Kind != obj.Kind {
		return fmt.Errorf("lbrecontest: destroy %v: %w", obj, lbrecon.ErrNotFound)
	}
	delete(e.objs, obj.ID)
	return nil
}

// Tag implements lbrecon.Engine.
func (e *Engine) Tag(ctx context.Context, obj lbrecon.Object, tags []string) error {
	f, err := e.begin(ctx, lbrecon.VerbTag, obj)
	if err != nil {
		return err
	}
	if f != nil {
		return f.apply(e, obj)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	o, ok := e.objs[obj.ID]
	if !ok || o.Kind != obj.Kind {
		return fmt.Errorf("lbrecontest: tag %v: %w", obj, lbrecon.ErrNotFound)
	}
	for _, t := range tags {
		if !slices.Contains(o.Tags, t) {
			o.Tags = append(o.Tags, t)
		}
	}
	return nil
}

// Repair implements lbrecon.Repairer: with Config.Repair it starts a new
// pending period for a failed object.
func (e *Engine) Repair(ctx context.Context, obj lbrecon.Object) (lbrecon.Object, error) {
	f, err := e.begin(ctx, lbrecon.VerbRepair, obj)
	if err != nil {
		return lbrecon.Object{}, err
	}
	if f != nil {
		return lbrecon.Object{}, f.apply(e, obj)
	}
	if !e.cfg.Repair {
		return lbrecon.Object{}, fmt.Errorf("lbrecontest: repair: %w", lbrecon.ErrNotSupported)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	o, ok := e.objs[obj.ID]
	if !ok || o.Kind != obj.Kind {
		return lbrecon.Object{}, fmt.Errorf("lbrecontest: repair %v: %w", obj, lbrecon.ErrNotFound)
	}
	e.provision(o)
	return e.view(o, e.clock.Now()), nil
}

// view returns a copy of o with its state as of now. Called with e.mu held.
func (e *Engine) view(o *object, now time.Time) lbrecon.Object {
	if o.State == lbrecon.StatePending && !o.readyAt.IsZero() && !now.Before(o.readyAt) {
		o.State = lbrecon.StateOK
		if o.fails {
			o.State = lbrecon.StateFailed
		}
	}
	v := o.Object
	v.Tags = slices.Clone(v.Tags)
	return v
}

func (e *Engine) newID() string {
	e.nextID++
	return fmt.Sprintf("id-%06d", e.nextID)
}

// compareIDs orders generated IDs numerically: shorter first, then by text.
func compareIDs(a, b string) int {
	return cmp.Or(cmp.Compare(len(a), len(b)), cmp.Compare(a, b))
}
