package lbrecontest

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/lbrecon"
)

type object struct {
	lbrecon.Object
	readyAt   time.Time
	fails     bool      // turns failed instead of ok at readyAt
	visibleAt time.Time // List shows the object from then on
	goneAt    time.Time // deletion completes then (zero: not deleting)
	listed    lbrecon.Object
	listedAt  time.Time // List shows Object instead of listed from then on
	hidden    int       // List calls that still leave it out (LagListings)
	late      bool      // created by a call whose answer was lost (ReplicaLag)
	assigned  any       // the status the provider assigned, shown from assignAt (AssignVIP)
	assignAt  time.Time
}

// Engine is an in-memory [lbrecon.Engine], [lbrecon.Repairer] and
// [lbrecon.Updater]. It is safe for concurrent use.
type Engine struct {
	cfg   Config
	clock clock.Clock

	mu        sync.Mutex
	objs      map[lbrecon.Key]*object
	tombs     []tombstone
	nextID    map[string]int // by kind, or "" for all kinds
	calls     map[lbrecon.Verb]int
	requests  int
	faults    []*fault
	turn      []*fault // objects created while these match end failed
	low       map[lbrecon.Key]int
	tokens    map[string]lbrecon.Key    // idempotency token -> the object its creation made
	changed   chan struct{}             // closed and replaced at every change of the objects
	hist      map[lbrecon.Key][]version // with ReplicaLag: what replicas may still show
	rng       *rand.Rand                // draws replicas' lags, from Config.Seed
	bucket    float64                   // tokens left (Config.Rate)
	bucketAt  time.Time                 // when bucket was last filled
	highest   uint64                    // the highest fencing token a write carried (Config.Fence)
	fenced    int
	throttled int
	vips      int // addresses assigned (Config.AssignVIP)
}

var (
	_ lbrecon.Engine            = (*Engine)(nil)
	_ lbrecon.Repairer          = (*Engine)(nil)
	_ lbrecon.Updater           = (*Engine)(nil)
	_ lbrecon.IdempotentCreator = (*Engine)(nil)
	_ lbrecon.ListLagger        = (*Engine)(nil)
	_ lbrecon.ListingLagger     = (*Engine)(nil)
)

// New returns an empty engine.
func New(cfg Config) *Engine {
	c := cfg.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	if cfg.Refs == nil {
		cfg.Refs = LoadBalancerRefs
		if cfg.LoadBalancerObjects {
			cfg.Refs = LoadBalancerObjectRefs
		}
	}
	if cfg.Scope == nil {
		cfg.Scope = loadBalancerScope
	}
	return &Engine{cfg: cfg, clock: c, objs: make(map[lbrecon.Key]*object), nextID: make(map[string]int),
		calls: make(map[lbrecon.Verb]int), low: make(map[lbrecon.Key]int), tokens: make(map[string]lbrecon.Key),
		hist: make(map[lbrecon.Key][]version), rng: rand.New(rand.NewPCG(cfg.Seed, 0x1b5))}
}

// begin counts the call, takes a token from the bucket, waits the
// latency, checks the fence and returns the fault to apply.
func (e *Engine) begin(ctx context.Context, verb lbrecon.Verb, obj lbrecon.Object) (*fault, error) {
	e.mu.Lock()
	e.calls[verb]++
	e.requests++
	err := e.throttle(e.clock.Now())
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
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
	if err := e.fence(ctx, verb, obj); err != nil {
		return nil, err
	}
	return take(e.faults, verb, obj), nil
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
	defer e.snap() // the pending periods that ended, seen by the primary
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
	if e.cfg.ReplicaLag > 0 {
		for _, v := range e.replicaList(now) {
			consider(v)
		}
	} else {
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
	}
	e.requests += len(out)
	if tagged == 0 && e.cfg.NothingTagged {
		return nil, fmt.Errorf("lbrecontest: 422 nothing tagged with %q: %w", q.Tag, lbrecon.ErrNotFound)
	}
	slices.SortFunc(out, compareObjects)
	return out, nil
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
	return e.store(obj)
}

// store creates obj, pending for the configured period.
func (e *Engine) store(obj lbrecon.Object) (lbrecon.Object, error) { return e.storeAs(obj, false) }

// storeLost creates obj for a call whose answer is lost: with ReplicaLag,
// replicas show it only after the whole lag.
func (e *Engine) storeLost(obj lbrecon.Object) (lbrecon.Object, error) { return e.storeAs(obj, true) }

// storeAs checks obj's references again (admit's check and this store
// are not one critical section: a parent's Destroy may come between them)
// and stores it.
func (e *Engine) storeAs(obj lbrecon.Object, lost bool) (lbrecon.Object, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.refsExist(obj); err != nil {
		return lbrecon.Object{}, err
	}
	now := e.clock.Now()
	obj.ID = e.newID(obj.Kind)
	obj.Tags = slices.Clone(obj.Tags)
	if e.cfg.Default != nil {
		obj.Spec = e.cfg.Default(obj.Spec)
	}
	obj.Status = nil
	o := &object{Object: obj, visibleAt: now.Add(e.cfg.ListLag), hidden: e.cfg.LagListings, late: lost}
	e.provision(o)
	e.assign(o)
	e.objs[obj.Key()] = o
	e.track()
	return e.view(o, e.clock.Now()), nil
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
	if e.promote(o, now) {
		e.notify()
	}
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
