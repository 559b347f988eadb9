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

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/lbrecon"
)

// ErrInjected is wrapped by the errors of injected faults.
var ErrInjected = errors.New("lbrecontest: injected fault")

// ErrCrashed is wrapped by Create when a [Engine.CrashBeforeTag] fault made
// it create the object without its tags.
var ErrCrashed = errors.New("lbrecontest: crashed between create and tag")

// RateLimitError is returned by rate-limited calls. Its RetryAfter method is
// the hint the reconciler honours (0 means the provider gave none).
type RateLimitError struct{ After time.Duration }

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("lbrecontest: 429 rate limited, retry after %v", e.After)
}

// RetryAfter returns how long to wait before the next call.
func (e *RateLimitError) RetryAfter() time.Duration { return e.After }

// Config configures an [Engine]. The zero value is an instant, consistent
// engine without integrity checks.
type Config struct {
	// Clock measures latency, pending periods and lags; nil means the real
	// clock.
	Clock clock.Clock
	// Latency is how long every call takes.
	Latency time.Duration
	// Pending is how long a created or repaired object stays pending.
	Pending time.Duration
	// Repair makes the engine repair failed objects in place; without it,
	// Repair returns an error wrapping lbrecon.ErrNotSupported.
	Repair bool
	// NoUpdate makes Update return an error wrapping
	// lbrecon.ErrNotSupported.
	NoUpdate bool
	// NothingTagged makes List fail with an error wrapping
	// lbrecon.ErrNotFound when no object carries the tag, like providers that
	// answer an empty tag query with an error.
	NothingTagged bool

	// ListLag is how long List lags behind writes: a created object is not
	// listed, a destroyed one is still listed (as last seen), and updated
	// specs and added tags are listed as before, until ListLag has passed.
	ListLag time.Duration
	// LagListings makes List lag by a number of listings rather than a
	// time: a created object is left out of the next LagListings List
	// calls (of any caller), on top of ListLag.
	LagListings int
	// DeleteDelay makes deletion asynchronous: a destroyed object still
	// exists (Get finds it, its name stays taken, it still counts as a
	// child) for DeleteDelay.
	DeleteDelay time.Duration
	// Integrity enforces references (see Refs): destroying an object that
	// existing objects refer to fails with lbrecon.ErrConflict
	// (ResourceInUse), and so does creating or updating an object that
	// refers to a missing or deleting one.
	Integrity bool
	// UniqueNames makes Create fail with lbrecon.ErrAlreadyExists when an
	// object of the kind with the name exists.
	UniqueNames bool
	// MaxNameLen, when positive, makes Create refuse longer names with a
	// permanent error.
	MaxNameLen int
	// Refs returns the keys an object refers to; nil means the
	// load-balancer plan's references (a frontend's backend, a bind's
	// frontend, a server's backend).
	Refs func(lbrecon.Object) []lbrecon.Key
	// Scope returns the scope of an untagged object, for List; nil means
	// the load-balancer plan's (the load balancer of a backend or frontend,
	// and of a bind's or server's parent). Untagged objects are listed only
	// within the queried scope.
	Scope func(e *Engine, o lbrecon.Object) string
	// Default, when set, fills fields the provider defaults: it is applied
	// to the spec of every created or updated object.
	Default func(spec any) any
	// IDsPerKind makes identifiers unique per kind only, as on providers
	// where a backend and a server can share an ID.
	IDsPerKind bool
	// Idempotency makes CreateIdempotent honour idempotency tokens (see
	// lbrecon.IdempotentCreator); without it, CreateIdempotent answers
	// lbrecon.ErrNotSupported.
	Idempotency bool
	// UniqueBinds makes Create and Update of a bind fail with
	// lbrecon.ErrConflict when another bind of the same load balancer (see
	// Scope) listens on the same address and port, as a provider refuses a
	// duplicate listener. A bind being deleted holds its address and port
	// until the deletion completes.
	UniqueBinds bool
}

type object struct {
	lbrecon.Object
	readyAt   time.Time
	fails     bool      // turns failed instead of ok at readyAt
	visibleAt time.Time // List shows the object from then on
	goneAt    time.Time // deletion completes then (zero: not deleting)
	listed    lbrecon.Object
	listedAt  time.Time // List shows Object instead of listed from then on
	hidden    int       // List calls that still leave it out (LagListings)
}

type tombstone struct {
	obj   lbrecon.Object
	until time.Time
}

type fault struct {
	verb  lbrecon.Verb
	match func(lbrecon.Object) bool
	left  int // <0: forever
	apply func(*Engine, lbrecon.Object) error
}

// Engine is an in-memory [lbrecon.Engine], [lbrecon.Repairer] and
// [lbrecon.Updater]. It is safe for concurrent use.
type Engine struct {
	cfg   Config
	clock clock.Clock

	mu       sync.Mutex
	objs     map[lbrecon.Key]*object
	tombs    []tombstone
	nextID   map[string]int // by kind, or "" for all kinds
	calls    map[lbrecon.Verb]int
	requests int
	faults   []*fault
	turn     []*fault // objects created while these match end failed
	low      map[lbrecon.Key]int
	tokens   map[string]lbrecon.Key // idempotency token -> the object its creation made
	changed  chan struct{}          // closed and replaced at every change of the objects
}

var (
	_ lbrecon.Engine            = (*Engine)(nil)
	_ lbrecon.Repairer          = (*Engine)(nil)
	_ lbrecon.Updater           = (*Engine)(nil)
	_ lbrecon.IdempotentCreator = (*Engine)(nil)
)

// New returns an empty engine.
func New(cfg Config) *Engine {
	c := cfg.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	if cfg.Refs == nil {
		cfg.Refs = LoadBalancerRefs
	}
	if cfg.Scope == nil {
		cfg.Scope = loadBalancerScope
	}
	return &Engine{cfg: cfg, clock: c, objs: make(map[lbrecon.Key]*object), nextID: make(map[string]int),
		calls: make(map[lbrecon.Verb]int), low: make(map[lbrecon.Key]int), tokens: make(map[string]lbrecon.Key)}
}

// LoadBalancerRefs returns the parent of an object of the load-balancer plan.
func LoadBalancerRefs(o lbrecon.Object) []lbrecon.Key {
	switch s := o.Spec.(type) {
	case lbrecon.FrontendSpec:
		return []lbrecon.Key{{Kind: lbrecon.KindBackend, ID: s.DefaultBackend}}
	case lbrecon.BindSpec:
		return []lbrecon.Key{{Kind: lbrecon.KindFrontend, ID: s.Frontend}}
	case lbrecon.ServerSpec:
		return []lbrecon.Key{{Kind: lbrecon.KindBackend, ID: s.Backend}}
	}
	return nil
}

// loadBalancerScope returns the load balancer an object belongs to.
// Called with e.mu held.
func loadBalancerScope(e *Engine, o lbrecon.Object) string {
	switch s := o.Spec.(type) {
	case lbrecon.BackendSpec:
		return s.LoadBalancer
	case lbrecon.FrontendSpec:
		return s.LoadBalancer
	}
	for _, k := range e.cfg.Refs(o) {
		if p, ok := e.objs[k]; ok {
			return loadBalancerScope(e, p.Object)
		}
	}
	return ""
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

// Requests returns the provider requests made so far under the cost model:
// a List that returns N objects costs 1 + N, every other call 1.
func (e *Engine) Requests() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.requests
}

// ResetCalls sets every call and request counter back to zero.
func (e *Engine) ResetCalls() {
	e.mu.Lock()
	defer e.mu.Unlock()
	clear(e.calls)
	e.requests = 0
}

// Low returns, per parent, the fewest existing children of kind it held
// since the last ResetLow (or since it got its first child), counting
// objects being deleted as gone and pending ones as present.
func (e *Engine) Low(kind string) map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]int)
	for k, n := range e.low {
		if k.Kind == kind {
			out[k.ID] = n
		}
	}
	return out
}

// ResetLow starts the tracking of Low afresh from the current counts.
func (e *Engine) ResetLow() {
	e.mu.Lock()
	defer e.mu.Unlock()
	clear(e.low)
	e.track()
}

// notify wakes the WaitFor calls. Called with e.mu held.
func (e *Engine) notify() {
	if e.changed != nil {
		close(e.changed)
		e.changed = nil
	}
}

// track updates the low-water marks after a change of the objects, and
// wakes the WaitFor calls. Called with e.mu held.
func (e *Engine) track() {
	e.notify()
	counts := make(map[lbrecon.Key]int)
	for _, o := range e.objs {
		if !o.goneAt.IsZero() {
			continue
		}
		for _, k := range e.cfg.Refs(o.Object) {
			counts[lbrecon.Key{Kind: o.Kind, ID: k.ID}]++
		}
	}
	for k, n := range counts {
		if l, ok := e.low[k]; !ok || n < l {
			e.low[k] = n
		}
	}
	for k := range e.low {
		if _, ok := counts[k]; !ok {
			e.low[k] = 0
		}
	}
}

// Objects returns a copy of every stored object (including those being
// deleted), with its current state, sorted by ID.
func (e *Engine) Objects() []lbrecon.Object {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	e.expire(now)
	out := make([]lbrecon.Object, 0, len(e.objs))
	for _, o := range e.objs {
		out = append(out, e.view(o, now))
	}
	slices.SortFunc(out, compareObjects)
	return out
}

// Put stores obj as it is, outside the API (no latency, not counted, listed
// at once), and returns it with its ID. An empty ID gets a fresh one; an
// empty state is ok.
func (e *Engine) Put(obj lbrecon.Object) lbrecon.Object {
	e.mu.Lock()
	defer e.mu.Unlock()
	if obj.ID == "" {
		obj.ID = e.newID(obj.Kind)
	}
	if obj.State == 0 {
		obj.State = lbrecon.StateOK
	}
	obj.Tags = slices.Clone(obj.Tags)
	e.objs[obj.Key()] = &object{Object: obj}
	e.track()
	return obj
}

// DeleteObject removes the object with key k outside the API, at once and
// from listings too, and reports whether there was one.
func (e *Engine) DeleteObject(k lbrecon.Key) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, found := e.objs[k]
	delete(e.objs, k)
	e.track()
	return found
}

// SetObjectState sets the state of the object with key k outside the API,
// and reports whether there was one.
func (e *Engine) SetObjectState(k lbrecon.Key, s lbrecon.State) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	o, found := e.objs[k]
	if found {
		o.State, o.readyAt, o.fails = s, time.Time{}, false
		e.notify()
	}
	return found
}

// Delete removes the objects with id, of any kind, as DeleteObject does.
//
// Deprecated: with [Config.IDsPerKind] it removes every kind's object with
// the ID; use DeleteObject.
func (e *Engine) Delete(id string) bool {
	found := false
	for _, k := range e.keysOf(id) {
		found = e.DeleteObject(k) || found
	}
	return found
}

// SetState sets the state of the objects with id, of any kind, as
// SetObjectState does.
//
// Deprecated: with [Config.IDsPerKind] it changes every kind's object with
// the ID; use SetObjectState.
func (e *Engine) SetState(id string, s lbrecon.State) bool {
	found := false
	for _, k := range e.keysOf(id) {
		found = e.SetObjectState(k, s) || found
	}
	return found
}

func (e *Engine) keysOf(id string) []lbrecon.Key {
	e.mu.Lock()
	defer e.mu.Unlock()
	var keys []lbrecon.Key
	for k := range e.objs {
		if k.ID == id {
			keys = append(keys, k)
		}
	}
	return keys
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

// FailCreateAfter makes the next n matching creations create the object
// (tagged) and then fail with a transient error, as a call whose answer was
// lost would.
func (e *Engine) FailCreateAfter(match func(lbrecon.Object) bool, n int) {
	e.inject(lbrecon.VerbCreate, match, n, func(e *Engine, obj lbrecon.Object) error {
		e.store(obj)
		return fmt.Errorf("%w: 503 after create", ErrInjected)
	})
}

// CrashBeforeTag makes the next n matching creations create the object
// without its tags and then fail with ErrCrashed, as a client that crashed
// between creating and tagging (or whose separate tagging call failed)
// would leave it.
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

// FailTag makes the next n matching Tag calls fail with a transient error.
func (e *Engine) FailTag(match func(lbrecon.Object) bool, n int) {
	e.inject(lbrecon.VerbTag, match, n, func(*Engine, lbrecon.Object) error {
		return fmt.Errorf("%w: tag failed", ErrInjected)
	})
}

// RateLimit makes the next n calls of verb fail with a [RateLimitError]
// asking to wait after (0: no hint).
func (e *Engine) RateLimit(verb lbrecon.Verb, n int, after time.Duration) {
	e.inject(verb, nil, n, func(*Engine, lbrecon.Object) error { return &RateLimitError{After: after} })
}

// RateLimitEvery makes every k-th call (of any verb) fail with a
// [RateLimitError] asking to wait after, until the engine is discarded.
func (e *Engine) RateLimitEvery(k int, after time.Duration) {
	if k <= 0 {
		return
	}
	n := 0
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults = append(e.faults, &fault{left: -1, match: func(lbrecon.Object) bool {
		n++
		return n%k == 0
	}, apply: func(*Engine, lbrecon.Object) error { return &RateLimitError{After: after} }})
}

// Unavailable makes every call, of any verb, fail with a transient 503
// error wrapping ErrInjected until d has passed on the engine's clock, as a
// provider's API does during an outage. Nothing is changed by those calls.
func (e *Engine) Unavailable(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	until := e.clock.Now().Add(d)
	e.faults = append(e.faults, &fault{left: -1, match: func(lbrecon.Object) bool {
		return e.clock.Now().Before(until) // called with e.mu held
	}, apply: func(*Engine, lbrecon.Object) error {
		return fmt.Errorf("%w: 503 service unavailable", ErrInjected)
	}})
}

// LoseCreateAnswers makes every k-th Create (counted from this call; k <= 0:
// none) create the object, tagged, and then fail with a transient error,
// as a call whose answer was lost would.
func (e *Engine) LoseCreateAnswers(k int) {
	if k <= 0 {
		return
	}
	n := 0
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults = append(e.faults, &fault{verb: lbrecon.VerbCreate, left: -1, match: func(lbrecon.Object) bool {
		n++
		return n%k == 0
	}, apply: func(e *Engine, obj lbrecon.Object) error {
		e.store(obj)
		return fmt.Errorf("%w: 503 after create, answer lost", ErrInjected)
	}})
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
	e.requests++
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
	e.expire(e.clock.Now())
	return take(e.faults, verb, obj), nil
}

// expire completes deletions and drops old tombstones. Called with e.mu held.
func (e *Engine) expire(now time.Time) {
	changed := false
	for k, o := range e.objs {
		if !o.goneAt.IsZero() && !now.Before(o.goneAt) {
			e.bury(o, o.goneAt) // gone then, not when first noticed
			delete(e.objs, k)
			changed = true
		}
	}
	e.tombs = slices.DeleteFunc(e.tombs, func(t tombstone) bool { return !now.Before(t.until) })
	if changed {
		e.track()
	}
}

// bury keeps an object deleted at gone listed until gone+ListLag. Called
// with e.mu held.
func (e *Engine) bury(o *object, gone time.Time) {
	if now := e.clock.Now(); e.cfg.ListLag > 0 && !gone.Before(o.visibleAt) && now.Before(gone.Add(e.cfg.ListLag)) {
		e.tombs = append(e.tombs, tombstone{obj: e.listView(o, gone), until: gone.Add(e.cfg.ListLag)})
	}
}

// List implements lbrecon.Engine: the objects carrying q.Tag and the
// untagged objects in q.Scope, as of ListLag ago.
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
	consider := func(v lbrecon.Object) {
		switch {
		case v.HasTag(q.Tag):
			tagged++
		case len(v.Tags) == 0 && q.Scope != "" && e.cfg.Scope(e, v) == q.Scope:
		default:
			return
		}
		out = append(out, v)
	}
	for _, o := range e.objs {
		if o.hidden > 0 {
			o.hidden--
			continue
		}
		if now.Before(o.visibleAt) {
			continue
		}
		consider(e.listView(o, now))
	}
	for _, t := range e.tombs {
		consider(t.obj)
	}
	e.requests += len(out)
	if tagged == 0 && e.cfg.NothingTagged {
		return nil, fmt.Errorf("lbrecontest: 422 nothing tagged with %q: %w", q.Tag, lbrecon.ErrNotFound)
	}
	slices.SortFunc(out, compareObjects)
	return out, nil
}

// listView is what List shows of o: its listed version while the last
// change is not visible yet. Called with e.mu held.
func (e *Engine) listView(o *object, now time.Time) lbrecon.Object {
	v := e.view(o, now)
	if now.Before(o.listedAt) {
		l := o.listed
		l.State = v.State
		l.Tags = slices.Clone(l.Tags)
		return l
	}
	return v
}

// Get implements lbrecon.Engine. It sees every write at once.
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
	o, ok := e.objs[obj.Key()]
	if !ok {
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
	if err := e.admit(obj); err != nil {
		return lbrecon.Object{}, err
	}
	if f != nil {
		return lbrecon.Object{}, f.apply(e, obj)
	}
	return e.store(obj), nil
}

// CreateIdempotent implements lbrecon.IdempotentCreator with
// Config.Idempotency: a creation with a token seen before returns the
// object that token's creation made, as it is now (even while lists lag),
// and creates nothing; it counts as a create call. Tokens are kept for the
// engine's life.
func (e *Engine) CreateIdempotent(ctx context.Context, obj lbrecon.Object, token string) (lbrecon.Object, error) {
	if !e.cfg.Idempotency {
		return lbrecon.Object{}, fmt.Errorf("lbrecontest: idempotency tokens: %w", lbrecon.ErrNotSupported)
	}
	f, err := e.begin(ctx, lbrecon.VerbCreate, obj)
	if err != nil {
		return lbrecon.Object{}, err
	}
	e.mu.Lock()
	if k, ok := e.tokens[token]; ok {
		defer e.mu.Unlock()
		if o, ok := e.objs[k]; ok {
			return e.view(o, e.clock.Now()), nil
		}
		return lbrecon.Object{}, fmt.Errorf("lbrecontest: 404 the creation of token %s was deleted: %w", token, lbrecon.ErrNotFound)
	}
	before := e.nextID[e.idKind(obj.Kind)]
	e.mu.Unlock()
	if err := e.admit(obj); err != nil {
		return lbrecon.Object{}, err
	}
	var got lbrecon.Object
	if f != nil {
		err = f.apply(e, obj)
	} else {
		got = e.store(obj)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, o := range e.objs { // the object this call stored, answer lost or not
		if k.Kind == obj.Kind && o.Name == obj.Name && idNumber(k.ID) > before {
			e.tokens[token] = k
		}
	}
	return got, err
}

func idNumber(id string) int {
	var n int
	_, _ = fmt.Sscanf(id, "id-%d", &n)
	return n
}

func (e *Engine) idKind(kind string) string {
	if !e.cfg.IDsPerKind {
		return ""
	}
	return kind
}

// admit checks a creation against names and references.
func (e *Engine) admit(obj lbrecon.Object) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cfg.MaxNameLen > 0 && len(obj.Name) > e.cfg.MaxNameLen {
		return backoff.Permanent(fmt.Errorf("lbrecontest: 400 name %q longer than %d", obj.Name, e.cfg.MaxNameLen))
	}
	if e.cfg.UniqueNames {
		for _, o := range e.objs {
			if o.Kind == obj.Kind && o.Name == obj.Name {
				return fmt.Errorf("lbrecontest: 409 %s name %q taken by %s: %w", obj.Kind, obj.Name, o.ID, lbrecon.ErrAlreadyExists)
			}
		}
	}
	if err := e.listenerFree(obj, lbrecon.Key{}); err != nil {
		return err
	}
	return e.refsExist(obj)
}

// listenerFree checks, with UniqueBinds, that no bind of the same load
// balancer other than self listens where obj, a bind, would. Called with
// e.mu held.
func (e *Engine) listenerFree(obj lbrecon.Object, self lbrecon.Key) error {
	s, ok := obj.Spec.(lbrecon.BindSpec)
	if !e.cfg.UniqueBinds || !ok {
		return nil
	}
	for k, o := range e.objs {
		if os, ok := o.Spec.(lbrecon.BindSpec); ok && k != self && os.Address == s.Address && os.Port == s.Port &&
			e.cfg.Scope(e, o.Object) == e.cfg.Scope(e, obj) {
			return fmt.Errorf("lbrecontest: 409 DuplicateListener: %v already listens on %v:%d: %w", o.Object, s.Address, s.Port, lbrecon.ErrConflict)
		}
	}
	return nil
}

// refsExist checks that obj's parents exist. Called with e.mu held.
func (e *Engine) refsExist(obj lbrecon.Object) error {
	if !e.cfg.Integrity {
		return nil
	}
	for _, k := range e.cfg.Refs(obj) {
		if p, ok := e.objs[k]; !ok || !p.goneAt.IsZero() {
			return fmt.Errorf("lbrecontest: 400 %v refers to missing %v: %w", obj, k, lbrecon.ErrConflict)
		}
	}
	return nil
}

// store creates obj, pending for the configured period.
func (e *Engine) store(obj lbrecon.Object) lbrecon.Object {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	obj.ID = e.newID(obj.Kind)
	obj.Tags = slices.Clone(obj.Tags)
	if e.cfg.Default != nil {
		obj.Spec = e.cfg.Default(obj.Spec)
	}
	o := &object{Object: obj, visibleAt: now.Add(e.cfg.ListLag), hidden: e.cfg.LagListings}
	e.provision(o)
	e.objs[obj.Key()] = o
	e.track()
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
	o, ok := e.objs[obj.Key()]
	if !ok {
		return fmt.Errorf("lbrecontest: destroy %v: %w", obj, lbrecon.ErrNotFound)
	}
	if !o.goneAt.IsZero() {
		return nil // already being deleted
	}
	if e.cfg.Integrity {
		for _, c := range e.objs {
			if slices.Contains(e.cfg.Refs(c.Object), obj.Key()) {
				return fmt.Errorf("lbrecontest: 409 ResourceInUse: %v is referred to by %v: %w", obj, c.Object, lbrecon.ErrConflict)
			}
		}
	}
	now := e.clock.Now()
	if e.cfg.DeleteDelay > 0 {
		o.goneAt = now.Add(e.cfg.DeleteDelay)
	} else {
		e.bury(o, now)
		delete(e.objs, obj.Key())
	}
	e.track()
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
	o, ok := e.objs[obj.Key()]
	if !ok {
		return fmt.Errorf("lbrecontest: tag %v: %w", obj, lbrecon.ErrNotFound)
	}
	e.remember(o)
	for _, t := range tags {
		if !slices.Contains(o.Tags, t) {
			o.Tags = append(o.Tags, t)
		}
	}
	e.notify()
	return nil
}

// Update implements lbrecon.Updater: it sets current's spec to desired's.
func (e *Engine) Update(ctx context.Context, current, desired lbrecon.Object) (lbrecon.Object, error) {
	f, err := e.begin(ctx, lbrecon.VerbUpdate, current)
	if err != nil {
		return lbrecon.Object{}, err
	}
	if f != nil {
		return lbrecon.Object{}, f.apply(e, current)
	}
	if e.cfg.NoUpdate {
		return lbrecon.Object{}, fmt.Errorf("lbrecontest: update: %w", lbrecon.ErrNotSupported)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	o, ok := e.objs[current.Key()]
	if !ok || !o.goneAt.IsZero() {
		return lbrecon.Object{}, fmt.Errorf("lbrecontest: update %v: %w", current, lbrecon.ErrNotFound)
	}
	if err := e.refsExist(desired); err != nil {
		return lbrecon.Object{}, err
	}
	if err := e.listenerFree(desired, current.Key()); err != nil {
		return lbrecon.Object{}, err
	}
	e.remember(o)
	o.Spec = desired.Spec
	if e.cfg.Default != nil {
		o.Spec = e.cfg.Default(o.Spec)
	}
	e.track()
	return e.view(o, e.clock.Now()), nil
}

// remember keeps o's listed version before a change, for ListLag. Called
// with e.mu held.
func (e *Engine) remember(o *object) {
	if e.cfg.ListLag <= 0 {
		return
	}
	now := e.clock.Now()
	if !now.Before(o.listedAt) {
		o.listed = o.Object
		o.listed.Tags = slices.Clone(o.Tags)
	}
	o.listedAt = now.Add(e.cfg.ListLag)
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
	o, ok := e.objs[obj.Key()]
	if !ok {
		return lbrecon.Object{}, fmt.Errorf("lbrecontest: repair %v: %w", obj, lbrecon.ErrNotFound)
	}
	e.provision(o)
	e.notify()
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

// newID returns a fresh identifier: unique across kinds, or only within
// kind with Config.IDsPerKind. Called with e.mu held.
func (e *Engine) newID(kind string) string {
	if !e.cfg.IDsPerKind {
		kind = ""
	}
	e.nextID[kind]++
	return fmt.Sprintf("id-%06d", e.nextID[kind])
}

// compareObjects orders objects by generated ID (numerically: shorter
// first, then by text), then by kind.
func compareObjects(a, b lbrecon.Object) int {
	return cmp.Or(cmp.Compare(len(a.ID), len(b.ID)), cmp.Compare(a.ID, b.ID), cmp.Compare(a.Kind, b.Kind))
}
