package main

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
	"github.com/reconkit/reconkit/versiongate"
)

// The label marking the Nodes of this program.
const (
	nodeLabel      = "reconkit.io/nodeagent"
	conditionGated = "VersionGateReady"
	ownerTag       = "owner=nodeagent"
)

// httpsRelease is the first release whose load balancer also forwards
// https: nodes below it do not listen on the https node port, so the
// state it reconciles is incompatible with them.
var httpsRelease = versiongate.Release{Major: 1, Minor: 1}

var httpsPort = portConfig{Name: "https", NodePort: 30443, ExternalPort: 443}

// releasePorts are the ports a release adds to the configured ones.
func releasePorts(r versiongate.Release) []portConfig {
	if r.Less(httpsRelease) {
		return nil
	}
	return []portConfig{httpsPort}
}

// minimumCompatible is the lowest node release that can serve on the load
// balancer release r reconciles.
func minimumCompatible(r versiongate.Release) versiongate.Release {
	if r.Less(httpsRelease) {
		return versiongate.Release{Major: 1}
	}
	return httpsRelease
}

// lbStore is the load balancer as every agent writes to it: the in-memory
// engine of lbrecontest behind a fence, as a provider with conditional
// writes keeps one (an etcd transaction comparing a fencing key, a
// version precondition on the object).
//
// Every write carries its writer's fencing token. The store compares it
// with the highest token it has seen and applies the write in the same
// critical section: writes at the highest token hold mu shared and run
// concurrently; a higher token takes mu exclusively, after every write
// admitted under the lower one has finished, and raises the fence. A write
// with a lower token is refused however late it arrives, whatever its
// writer believed when it sent it. Reads are not fenced.
type lbStore struct {
	eng *lbrecontest.Engine
	// via, when set, is the provider the agent's calls go to in place of
	// eng (the fleet simulator's link to its shared provider).
	via lbEngine

	mu      sync.RWMutex
	highest uint64 // written with mu held exclusively

	logMu   sync.Mutex
	applied []fencedWrite // in the order the store applied them
	refused []fencedWrite
}

// fencedWrite is one write the store applied or refused.
type fencedWrite struct {
	Token   uint64
	Highest uint64 // the store's highest token at the time
	Verb    lbrecon.Verb
	Name    string
}

func newLBStore(eng *lbrecontest.Engine) *lbStore { return &lbStore{eng: eng} }

// lbEngine is a provider with the optional writes termEngine forwards.
type lbEngine interface {
	lbrecon.Engine
	lbrecon.Repairer
	lbrecon.Updater
}

// target is the provider the agent's calls go to.
func (s *lbStore) target() lbEngine {
	if s.via != nil {
		return s.via
	}
	return s.eng
}

// apply runs write if token is not below the highest seen, raising the
// highest to token first, all in one critical section.
func (s *lbStore) apply(token uint64, verb lbrecon.Verb, name string, write func() error) error {
	s.mu.RLock()
	if token <= s.highest { // highest cannot change while mu is held
		defer s.mu.RUnlock()
		return s.applyLocked(token, verb, name, write)
	}
	s.mu.RUnlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if token > s.highest {
		s.highest = token
	}
	return s.applyLocked(token, verb, name, write)
}

// applyLocked is apply with mu held, shared or exclusive.
func (s *lbStore) applyLocked(token uint64, verb lbrecon.Verb, name string, write func() error) error {
	w := fencedWrite{Token: token, Highest: s.highest, Verb: verb, Name: name}
	if token < s.highest {
		s.logMu.Lock()
		s.refused = append(s.refused, w)
		s.logMu.Unlock()
		// The reconciler reports a *lbrecon.FenceError once per pass, naming
		// the fence, both tokens and how to clear it.
		return backoff.Permanent(fmt.Errorf("%s %s: %w", verb, name, &lbrecon.FenceError{
			Fence: "the example's load-balancer store", Stored: s.highest, Token: token,
			Clear: "restart the example (its store is in memory)",
		}))
	}
	err := write()
	if err == nil {
		s.logMu.Lock()
		s.applied = append(s.applied, w)
		s.logMu.Unlock()
	}
	return err
}

// raise writes nothing but the token: a new leader's first write, which
// fences off every lower token.
func (s *lbStore) raise(token uint64) error {
	return s.apply(token, "fence", "", func() error { return nil })
}

// history returns the writes the store applied and refused, in order.
func (s *lbStore) history() (applied, refused []fencedWrite) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return slices.Clone(s.applied), slices.Clone(s.refused)
}

// state returns the highest token seen and the number of refused writes.
func (s *lbStore) state() (highest uint64, refused int) {
	s.mu.RLock()
	highest = s.highest
	s.mu.RUnlock()
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return highest, len(s.refused)
}

// engine returns the store as the agent's reconciler writes to it: every
// write carries the fencing token of its context's term (lbrecon.WithToken),
// so one reconciler serves every term of the agent.
func (s *lbStore) engine() lbrecon.Engine { return &termEngine{s: s} }

// termEngine is the store seen by the term whose token a call's context
// carries. lbrecon.Guard forwards the optional Repairer and Updater to it,
// so it implements both.
type termEngine struct {
	s *lbStore
}

// termToken returns the term's token, or refuses a write that carries none.
func termToken(ctx context.Context, verb lbrecon.Verb, name string) (uint64, error) {
	t, ok := lbrecon.TokenFrom(ctx)
	if !ok {
		return 0, backoff.Permanent(fmt.Errorf("%w: %s %s", lbrecon.ErrNoToken, verb, name))
	}
	return t, nil
}

// apply is lbStore.apply with the token of ctx's term.
func (e *termEngine) apply(ctx context.Context, verb lbrecon.Verb, name string, write func() error) error {
	t, err := termToken(ctx, verb, name)
	if err != nil {
		return err
	}
	return e.s.apply(t, verb, name, write)
}

var (
	_ lbrecon.Engine   = (*termEngine)(nil)
	_ lbrecon.Repairer = (*termEngine)(nil)
	_ lbrecon.Updater  = (*termEngine)(nil)
)

func (e *termEngine) List(ctx context.Context, q lbrecon.Query) ([]lbrecon.Object, error) {
	return e.s.target().List(ctx, q)
}

func (e *termEngine) Get(ctx context.Context, o lbrecon.Object) (lbrecon.Object, error) {
	return e.s.target().Get(ctx, o)
}

func (e *termEngine) Create(ctx context.Context, o lbrecon.Object) (out lbrecon.Object, err error) {
	err = e.apply(ctx, lbrecon.VerbCreate, o.Name, func() error {
		out, err = e.s.target().Create(ctx, o)
		return err
	})
	return out, err
}

func (e *termEngine) Destroy(ctx context.Context, o lbrecon.Object) error {
	return e.apply(ctx, lbrecon.VerbDestroy, o.Name, func() error { return e.s.target().Destroy(ctx, o) })
}

func (e *termEngine) Tag(ctx context.Context, o lbrecon.Object, tags []string) error {
	return e.apply(ctx, lbrecon.VerbTag, o.Name, func() error { return e.s.target().Tag(ctx, o, tags) })
}

func (e *termEngine) Update(ctx context.Context, cur, desired lbrecon.Object) (out lbrecon.Object, err error) {
	err = e.apply(ctx, lbrecon.VerbUpdate, cur.Name, func() error {
		out, err = e.s.target().Update(ctx, cur, desired)
		return err
	})
	return out, err
}

func (e *termEngine) Repair(ctx context.Context, o lbrecon.Object) (out lbrecon.Object, err error) {
	err = e.apply(ctx, lbrecon.VerbRepair, o.Name, func() error {
		out, err = e.s.target().Repair(ctx, o)
		return err
	})
	return out, err
}

// lbSummary is what the live view shows of the load balancer.
type lbSummary struct {
	Objects, Pending, Failed int
	Binds                    []string // "192.0.2.10:80"
	Targets                  []string // node names with a server
}

func summarizeLB(objs []lbrecon.Object) lbSummary {
	var s lbSummary
	targets := map[string]bool{}
	for _, o := range objs {
		s.Objects++
		switch o.State {
		case lbrecon.StatePending:
			s.Pending++
		case lbrecon.StateFailed:
			s.Failed++
		}
		switch spec := o.Spec.(type) {
		case lbrecon.BindSpec:
			s.Binds = append(s.Binds, netip.AddrPortFrom(spec.Address, spec.Port).String())
		case lbrecon.ServerSpec:
			if target, _, ok := strings.Cut(o.Name, "."); ok && target != "" {
				targets[target] = true
			}
		}
	}
	slices.Sort(s.Binds)
	s.Binds = slices.Compact(s.Binds)
	for t := range targets {
		s.Targets = append(s.Targets, t)
	}
	slices.Sort(s.Targets)
	return s
}
