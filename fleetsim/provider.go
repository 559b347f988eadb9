package fleetsim

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// ErrUnreachable is wrapped by every provider call of an agent the nemesis
// cut from the provider: a transient error, as a refused connection is.
var ErrUnreachable = fmt.Errorf("fleetsim: provider unreachable: %w", syscall.ECONNREFUSED)

type agentKey struct{}

// link is one run's connection to the provider: it counts the run's calls,
// fails them while cut, and marks their context with the agent's name for
// the fence's checks. It forwards the optional interfaces of lbrecon that
// the fenced engine has.
type link struct {
	w   *world
	s   *slot
	e   lbrecon.Engine
	req *meter
	cut atomic.Bool
	// healed is when the nemesis last healed a cut of the link, in Unix
	// nanoseconds; pinged is set once the run called Deps.Ping.
	healed atomic.Int64
	pinged atomic.Bool
}

// ping is Deps.Ping: the backend is healthy unless the link is cut.
func (l *link) ping(ctx context.Context) error {
	l.pinged.Store(true)
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.cut.Load() {
		return ErrUnreachable
	}
	return nil
}

var (
	_ lbrecon.Engine            = (*link)(nil)
	_ lbrecon.Repairer          = (*link)(nil)
	_ lbrecon.Updater           = (*link)(nil)
	_ lbrecon.IdempotentCreator = (*link)(nil)
	_ lbrecon.ListLagger        = (*link)(nil)
	_ lbrecon.ListingLagger     = (*link)(nil)
)

func (l *link) call(ctx context.Context, verb lbrecon.Verb) (context.Context, error) {
	l.req.add(string(verb))
	if l.cut.Load() {
		return ctx, ErrUnreachable
	}
	return context.WithValue(ctx, agentKey{}, l.s.name), nil
}

func (l *link) List(ctx context.Context, q lbrecon.Query) ([]lbrecon.Object, error) {
	ctx, err := l.call(ctx, lbrecon.VerbList)
	if err != nil {
		return nil, err
	}
	return l.e.List(ctx, q)
}

func (l *link) Get(ctx context.Context, obj lbrecon.Object) (lbrecon.Object, error) {
	ctx, err := l.call(ctx, lbrecon.VerbGet)
	if err != nil {
		return lbrecon.Object{}, err
	}
	return l.e.Get(ctx, obj)
}

func (l *link) Create(ctx context.Context, obj lbrecon.Object) (lbrecon.Object, error) {
	ctx, err := l.call(ctx, lbrecon.VerbCreate)
	if err != nil {
		return lbrecon.Object{}, err
	}
	return l.e.Create(ctx, obj)
}

func (l *link) Destroy(ctx context.Context, obj lbrecon.Object) error {
	ctx, err := l.call(ctx, lbrecon.VerbDestroy)
	if err != nil {
		return err
	}
	return l.e.Destroy(ctx, obj)
}

func (l *link) Tag(ctx context.Context, obj lbrecon.Object, tags []string) error {
	ctx, err := l.call(ctx, lbrecon.VerbTag)
	if err != nil {
		return err
	}
	return l.e.Tag(ctx, obj, tags)
}

func (l *link) Repair(ctx context.Context, obj lbrecon.Object) (lbrecon.Object, error) {
	r, ok := l.e.(lbrecon.Repairer)
	if !ok {
		return lbrecon.Object{}, lbrecon.ErrNotSupported
	}
	ctx, err := l.call(ctx, lbrecon.VerbRepair)
	if err != nil {
		return lbrecon.Object{}, err
	}
	return r.Repair(ctx, obj)
}

func (l *link) Update(ctx context.Context, current, desired lbrecon.Object) (lbrecon.Object, error) {
	u, ok := l.e.(lbrecon.Updater)
	if !ok {
		return lbrecon.Object{}, lbrecon.ErrNotSupported
	}
	ctx, err := l.call(ctx, lbrecon.VerbUpdate)
	if err != nil {
		return lbrecon.Object{}, err
	}
	return u.Update(ctx, current, desired)
}

func (l *link) CreateIdempotent(ctx context.Context, obj lbrecon.Object, token string) (lbrecon.Object, error) {
	c, ok := l.e.(lbrecon.IdempotentCreator)
	if !ok {
		return lbrecon.Object{}, lbrecon.ErrNotSupported
	}
	ctx, err := l.call(ctx, lbrecon.VerbCreate)
	if err != nil {
		return lbrecon.Object{}, err
	}
	return c.CreateIdempotent(ctx, obj, token)
}

// ListLag forwards the provider's declared lag: the world's engine's, since
// lbrecon.Guard in front of it does not forward the count of listings.
func (l *link) ListLag() time.Duration { return l.w.engine.ListLag() }

// ListLagListings forwards the provider's declared count of listings.
func (l *link) ListLagListings() int { return l.w.engine.ListLagListings() }

// termWatch remembers, per fencing token, the context of the latest write
// that carried it, to tell whether a lower term is still live when a higher
// one writes.
type termWatch struct {
	mu    sync.Mutex
	terms map[uint64]termSeen
	// handedOver are the terms live when the nemesis deleted a Lease. An
	// operator who deletes the election's Lease hands the election to the
	// next candidate at once, and the two terms overlap until the holder
	// learns of it (election's doc: only the backend's own protocol is
	// covered; the fence still orders the terms, which FenceOrder checks),
	// so such a term is not judged by OneTerm for the rest of its life.
	handedOver map[uint64]bool
	// admitted is the highest token the world's fence let through, for
	// FenceOrder; it is recorded under mu with the fence's decision.
	admitted uint64
}

type termSeen struct {
	ctx   context.Context
	agent string
}

// leaseDeleted exempts every term live now from OneTerm (see
// termWatch.handedOver).
func (t *termWatch) leaseDeleted() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for token, seen := range t.terms {
		if seen.ctx.Err() == nil {
			if t.handedOver == nil {
				t.handedOver = map[uint64]bool{}
			}
			t.handedOver[token] = true
		}
	}
}

// check is the world's fence: every write an agent sends passes it. It
// records the term, refuses a token below the highest seen (lbrecon.Fence),
// reports a write of a higher term while a lower term's write context is
// still live, and reports a token the fence let through below one it let
// through before (FenceOrder).
func (w *world) check(ctx context.Context, verb lbrecon.Verb, obj lbrecon.Object) error {
	agent, _ := ctx.Value(agentKey{}).(string)
	token, ok := lbrecon.TokenFrom(ctx)
	if ok {
		w.terms.mu.Lock()
		if w.terms.terms == nil {
			w.terms.terms = map[uint64]termSeen{}
		}
		for t, seen := range w.terms.terms {
			switch {
			case seen.ctx.Err() != nil:
				delete(w.terms.terms, t)
			case t < token && w.terms.handedOver[t]:
				w.tl.add("check", "%s writes with token %#x while %s's term %#x, live when a Lease was deleted, is live: not judged",
					agent, token, seen.agent, t)
				delete(w.terms.terms, t)
			case t < token:
				defer w.violate(OneTerm, agent, "writes %s %s with token %#x while %s's term %#x is live", verb, obj.Name, token,
					seen.agent, t)
				delete(w.terms.terms, t)
			}
		}
		w.terms.terms[token] = termSeen{ctx: ctx, agent: agent}
		w.terms.mu.Unlock()
	}
	var lower bool
	var highest uint64
	err := lbrecon.CheckToken(func(token uint64) error {
		// The fence's decision and FenceOrder's record are one critical
		// section: two writes the fence admits in one order may reach the
		// engine behind it in the other, and that is no violation.
		w.terms.mu.Lock()
		defer w.terms.mu.Unlock()
		if err := w.fence.Admit(token); err != nil {
			return err
		}
		lower, highest = token < w.terms.admitted, w.terms.admitted
		w.terms.admitted = max(w.terms.admitted, token)
		return nil
	})(ctx, verb, obj)
	if lower {
		w.violate(FenceOrder, agent, "the fence let %s %s through with token %#x after a write with %#x", verb, obj.Name,
			token, highest)
	}
	if err != nil {
		w.tl.add("provider", "fence refuses %s %s %s from %s: %v", verb, obj.Kind, obj.Name, agent, err)
	}
	return err
}

// passed is the engine behind the fence: it sees only the writes the fence
// let through. Behind the world's fence, the order of their tokens is
// checked where the fence decides (world.check), since writes it admits in
// order may arrive here in either; with no fence before it, passed checks
// that the tokens of the writes it sees never go down.
type passed struct {
	w       *world
	e       *lbrecontest.Engine
	mu      sync.Mutex
	highest uint64
}

// wrote records a write that passed the fence, before it is sent, and
// returns the function that records its answer.
func (p *passed) wrote(ctx context.Context, verb lbrecon.Verb, obj lbrecon.Object) func(id string, err error) {
	agent, _ := ctx.Value(agentKey{}).(string)
	token, _ := lbrecon.TokenFrom(ctx)
	p.mu.Lock()
	lower := token < p.highest && p.w.fence == nil
	highest := p.highest
	p.highest = max(p.highest, token)
	p.mu.Unlock()
	p.w.checkServing(agent)
	if lower {
		p.w.violate(FenceOrder, agent, "the fence let %s %s through with token %#x after a write with %#x", verb, obj.Name,
			token, highest)
	}
	return func(id string, err error) {
		answer := "ok"
		switch {
		case err != nil:
			answer = err.Error()
		case id != "":
			answer = id
		}
		p.w.tl.add("provider", "%s %s %s by %s, token %#x: %s", verb, obj.Kind, obj.Name, agent, token, answer)
	}
}

func (p *passed) List(ctx context.Context, q lbrecon.Query) ([]lbrecon.Object, error) {
	return p.e.List(ctx, q)
}

func (p *passed) Get(ctx context.Context, obj lbrecon.Object) (lbrecon.Object, error) {
	return p.e.Get(ctx, obj)
}

func (p *passed) Create(ctx context.Context, obj lbrecon.Object) (lbrecon.Object, error) {
	done := p.wrote(ctx, lbrecon.VerbCreate, obj)
	got, err := p.e.Create(ctx, obj)
	done(got.ID, err)
	return got, err
}

func (p *passed) Destroy(ctx context.Context, obj lbrecon.Object) error {
	done := p.wrote(ctx, lbrecon.VerbDestroy, obj)
	err := p.e.Destroy(ctx, obj)
	done(obj.ID, err)
	return err
}

func (p *passed) Tag(ctx context.Context, obj lbrecon.Object, tags []string) error {
	done := p.wrote(ctx, lbrecon.VerbTag, obj)
	err := p.e.Tag(ctx, obj, tags)
	done(obj.ID, err)
	return err
}

func (p *passed) Repair(ctx context.Context, obj lbrecon.Object) (lbrecon.Object, error) {
	done := p.wrote(ctx, lbrecon.VerbRepair, obj)
	got, err := p.e.Repair(ctx, obj)
	done(got.ID, err)
	return got, err
}

func (p *passed) Update(ctx context.Context, current, desired lbrecon.Object) (lbrecon.Object, error) {
	done := p.wrote(ctx, lbrecon.VerbUpdate, desired)
	got, err := p.e.Update(ctx, current, desired)
	done(got.ID, err)
	return got, err
}

func (p *passed) CreateIdempotent(ctx context.Context, obj lbrecon.Object, token string) (lbrecon.Object, error) {
	if !p.w.cfg.Provider.Idempotency {
		return lbrecon.Object{}, lbrecon.ErrNotSupported // nothing sent, so nothing recorded
	}
	done := p.wrote(ctx, lbrecon.VerbCreate, obj)
	got, err := p.e.CreateIdempotent(ctx, obj, token)
	done(got.ID, err)
	return got, err
}

func (p *passed) ListLag() time.Duration { return p.e.ListLag() }
