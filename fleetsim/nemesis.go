package fleetsim

import (
	"cmp"
	"context"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/lbrecon"
)

// Kind is a kind of event the nemesis makes.
type Kind string

// The kinds of events.
const (
	// Crash stops an agent as a power loss does (its client and provider
	// link cut first, its disk frozen, then its unsynced writes dropped) and
	// starts it again on the same disk 5 to 60 seconds later.
	Crash Kind = "crash"
	// PartitionAPIServer cuts an agent's client (kubefake.Client.Cut) for 5
	// to 90 seconds.
	PartitionAPIServer Kind = "partition-apiserver"
	// PartitionProvider cuts an agent's provider link for 5 to 90 seconds:
	// every call fails with ErrUnreachable.
	PartitionProvider Kind = "partition-provider"
	// RestartAPIServer restarts the apiserver: every watch ends
	// (kubefake.Server.EndWatches), and with a server that has a Restart
	// method, that is called instead.
	RestartAPIServer Kind = "apiserver-restart"
	// EmptyWatches makes every watch of one agent end at once with no
	// event, as behind a proxy that closes idle streams, for 30 seconds to
	// 3 minutes.
	EmptyWatches Kind = "empty-watches"
	// DeleteLease deletes one Lease, chosen among all of them (an
	// election's, a version gate's records, Node heartbeats), as an
	// operator does to unstick a controller.
	DeleteLease Kind = "delete-lease"
	// OperatorEdit makes one of Nemesis.Edits, and undoes it 20 to 120
	// seconds later.
	OperatorEdit Kind = "operator-edit"
	// ProviderRateLimit makes the next 1 to 30 provider calls of one verb
	// answer 429, with a Retry-After of 0 to 10 seconds.
	ProviderRateLimit Kind = "provider-429"
	// ProviderOutage makes every provider call answer 503 for 10 seconds
	// to 3 minutes.
	ProviderOutage Kind = "provider-outage"
	// ProviderFailCreate makes the next 1 to 5 creations fail (none once
	// the quiet period began).
	ProviderFailCreate Kind = "provider-fail-create"
	// ProviderLostAnswer loses the answer of every first to third creation
	// (made, then reported failed) for 30 seconds to 3 minutes.
	ProviderLostAnswer Kind = "provider-lost-answer"
	// RollingUpgrade stops one agent below the newest of Config.Gate's
	// Releases, as a rolling update does (its context ends, no power loss),
	// and starts it again 5 to 30 seconds later at the next release; it
	// never happens without two releases. Releases only go up, and the
	// quiet period completes the upgrade: it starts every agent at the
	// highest release one reached.
	RollingUpgrade Kind = "rolling-upgrade"
	// SlowReads makes every get and list of one agent wait 100ms to 3s
	// before the apiserver sees it, for 30 seconds to 3 minutes; its other
	// requests go on meanwhile (see the package documentation).
	SlowReads Kind = "slow-reads"
	// SlowWrites does the same to creations, updates, patches and
	// deletions.
	SlowWrites Kind = "slow-writes"
	// ServiceChange deletes one Service, or changes its type between
	// LoadBalancer and ClusterIP, and undoes that 20 seconds to 2 minutes
	// later; it does nothing when there is no Service.
	ServiceChange Kind = "service-change"
	// NamespaceDelete deletes one namespace of Config.Objects as the
	// namespace controller would: every configmap, secret, service,
	// endpoints, event, pod, lease and endpointslice in it is deleted
	// (finalizers keep theirs terminating), and creations in it are
	// refused with 403 Forbidden until, 20 seconds to 2 minutes later, the
	// namespace and its Config.Objects are created again. The Namespace
	// object itself is not modelled.
	NamespaceDelete Kind = "namespace-delete"
	// ClockDrift sets one agent's clock (Deps.Clock) to run at a rate
	// drawn within Nemesis.MaxDrift of simulated time, the apiserver's and
	// provider's; the rate lasts, across restarts and the quiet period,
	// until the next ClockDrift of that agent. A timer runs at the rate of
	// when it was set.
	ClockDrift Kind = "clock-drift"
)

// Kinds returns every kind of event, in a fixed order.
func Kinds() []Kind {
	return []Kind{Crash, PartitionAPIServer, PartitionProvider, RestartAPIServer, DeleteLease,
		OperatorEdit, ProviderRateLimit, ProviderOutage, ProviderFailCreate, ProviderLostAnswer, EmptyWatches,
		RollingUpgrade, SlowReads, SlowWrites, ServiceChange, NamespaceDelete,
		ClockDrift}
}

// DefaultWeights returns the weights a Nemesis with nil Weights uses.
func DefaultWeights() map[Kind]int {
	return map[Kind]int{Crash: 3, PartitionAPIServer: 3, PartitionProvider: 2, RestartAPIServer: 2,
		DeleteLease: 1, OperatorEdit: 1, ProviderRateLimit: 2, ProviderOutage: 1, ProviderFailCreate: 1,
		ProviderLostAnswer: 1, EmptyWatches: 1, RollingUpgrade: 1,
		SlowReads: 1, SlowWrites: 1, ServiceChange: 1, NamespaceDelete: 1,
		ClockDrift: 1}
}

// Nemesis chooses the faults of a run.
type Nemesis struct {
	// Weights is how often each kind happens relative to the others; a
	// kind absent or weighted 0 never happens. nil means DefaultWeights.
	Weights map[Kind]int
	// Every is the mean simulated time between two events (drawn from an
	// exponential distribution); 0 means 20 seconds.
	Every time.Duration
	// Edits are the operator edits OperatorEdit chooses from; with none,
	// OperatorEdit never happens.
	Edits []Edit
	// MaxDrift bounds ClockDrift: an agent's clock runs at a rate within
	// [1-MaxDrift, 1+MaxDrift]; 0 means DefaultMaxDrift.
	MaxDrift float64
}

// Without returns n with kinds turned off.
func (n Nemesis) Without(kinds ...Kind) Nemesis {
	w := n.Weights
	if w == nil {
		w = DefaultWeights()
	}
	n.Weights = map[Kind]int{}
	for k, v := range w {
		if !slices.Contains(kinds, k) {
			n.Weights[k] = v
		}
	}
	return n
}

// Only returns n with every kind but kinds turned off.
func (n Nemesis) Only(kinds ...Kind) Nemesis {
	w := n.Weights
	if w == nil {
		w = DefaultWeights()
	}
	n.Weights = map[Kind]int{}
	for _, k := range kinds {
		n.Weights[k] = cmp.Or(w[k], 1)
	}
	return n
}

func (n Nemesis) withDefaults() Nemesis {
	if n.Weights == nil {
		n.Weights = DefaultWeights()
	}
	if n.Every == 0 {
		n.Every = 20 * time.Second
	}
	if n.MaxDrift == 0 {
		n.MaxDrift = DefaultMaxDrift
	}
	return n
}

// nemesis is one run's: a random source per kind of event, and one for the
// schedule, each drawn from the seed alone, so that turning one kind off
// shifts no other kind's draws.
type nemesis struct {
	w     *world
	sched *rand.Rand
	rng   map[Kind]*rand.Rand
	kinds []Kind
	total int
	undo  []pending // by time
	// services are the Services ServiceChange changed and has not put
	// back yet: they are left alone until it has.
	services map[string]bool
}

// pending is a fault's end: a healed partition, a restarted agent.
type pending struct {
	at   time.Time
	what string
	do   func(ctx context.Context)
}

func stream(seed uint64, name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte("fleetsim/" + name))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

func newNemesis(w *world) *nemesis {
	n := &nemesis{w: w, sched: stream(w.cfg.Seed, "schedule"), rng: map[Kind]*rand.Rand{}}
	for _, k := range Kinds() {
		n.rng[k] = stream(w.cfg.Seed, string(k))
		weight := w.cfg.Nemesis.Weights[k]
		if k == OperatorEdit && len(w.cfg.Nemesis.Edits) == 0 || k == RollingUpgrade && len(w.cfg.Gate.Releases) < 2 {
			weight = 0
		}
		if weight > 0 {
			n.kinds = append(n.kinds, k)
			n.total += weight
		}
	}
	return n
}

// between draws a duration in [lo, hi].
func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}

// later schedules do after d.
func (n *nemesis) later(d time.Duration, what string, do func(ctx context.Context)) {
	p := pending{at: time.Now().Add(d), what: what, do: do}
	i, _ := slices.BinarySearchFunc(n.undo, p, func(a, b pending) int {
		return cmp.Or(a.at.Compare(b.at), -1) // after every pending at the same time
	})
	n.undo = slices.Insert(n.undo, i, p)
}

// run makes events until Config.Duration has passed, ctx ends or an
// invariant fails, and returns how many it made.
func (n *nemesis) run(ctx context.Context) int {
	end := time.Now().Add(n.w.cfg.Duration)
	next := time.Now().Add(n.gap())
	nextClear := time.Now().Add(5 * time.Minute)
	events := 0
	for {
		at := next
		if end.Before(at) {
			at = end
		}
		if len(n.undo) > 0 && n.undo[0].at.Before(at) {
			at = n.undo[0].at
		}
		if !sleepUntil(ctx, n.w.failed, at) {
			return events
		}
		now := time.Now()
		if !now.Before(nextClear) {
			n.w.clearActions()
			nextClear = now.Add(5 * time.Minute)
		}
		switch {
		case len(n.undo) > 0 && !n.undo[0].at.After(now):
			p := n.undo[0]
			n.undo = n.undo[1:]
			n.w.tl.add("nemesis", "%s", p.what)
			p.do(ctx)
		case !now.Before(end):
			return events
		default:
			next = now.Add(n.gap())
			if n.total == 0 {
				continue
			}
			events++
			n.event(ctx, n.pick())
		}
	}
}

// undoAll ends every fault at once, in the order they were due.
func (n *nemesis) undoAll(ctx context.Context) {
	n.w.quieting.Store(true)
	for _, p := range n.undo {
		n.w.tl.add("nemesis", "%s", p.what)
		p.do(ctx)
	}
	n.undo = nil
	n.w.engine.LoseCreateAnswers(0)
	n.completeUpgrade()
}

// completeUpgrade ends a rolling upgrade under way as its operator does:
// every agent below the highest release an upgrade reached is stopped (no
// power loss) and, with the others, started again at that release when the
// quiet period starts them. A version gate holds back the newer release's
// state while older nodes remain, so a fleet left half upgraded would
// converge on no state the host can describe.
func (n *nemesis) completeUpgrade() {
	w := n.w
	top := 0
	for _, s := range w.agents {
		top = max(top, s.releaseIndex)
	}
	for _, s := range w.agents {
		if s.releaseIndex == top {
			continue
		}
		to := w.cfg.Gate.Releases[top]
		w.tl.add("nemesis", "rolling upgrade completes: %s from %s to %s", s.name, s.release.Release, to.Release)
		if s.running() {
			w.stop(s, false)
		}
		s.releaseIndex, s.release = top, to
	}
}

func (n *nemesis) gap() time.Duration {
	return time.Duration(n.sched.ExpFloat64() * float64(n.w.cfg.Nemesis.Every))
}

func (n *nemesis) pick() Kind {
	x := n.sched.IntN(n.total)
	for _, k := range n.kinds {
		x -= n.w.cfg.Nemesis.Weights[k]
		if x < 0 {
			return k
		}
	}
	return n.kinds[len(n.kinds)-1]
}

// sleepUntil waits until at, and reports false if ctx ended or failed was
// closed first.
func sleepUntil(ctx context.Context, failed <-chan struct{}, at time.Time) bool {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-failed:
		return false
	case <-t.C:
		return true
	}
}

// event makes one event of kind k.
func (n *nemesis) event(ctx context.Context, k Kind) {
	w, r := n.w, n.rng[k]
	tl := func(format string, args ...any) { w.tl.add("nemesis", string(k)+": "+format, args...) }
	s := w.agents[r.IntN(len(w.agents))]
	switch k {
	case Crash:
		d := between(r, 5*time.Second, time.Minute)
		if !s.running() {
			tl("%s is down already", s.name)
			return
		}
		tl("%s, back in %s", s.name, d)
		w.stop(s, true)
		n.later(d, "restart "+s.name, func(ctx context.Context) {
			if !s.running() && ctx.Err() == nil {
				w.start(ctx, s)
			}
		})
	case PartitionAPIServer:
		d := between(r, 5*time.Second, 90*time.Second)
		if !s.running() {
			tl("%s is down", s.name)
			return
		}
		c := s.kube
		tl("%s cut from the apiserver for %s", s.name, d)
		c.Cut()
		s.partitioned.Store(true)
		n.later(d, "heal "+s.name+" to the apiserver", func(context.Context) {
			c.Heal()
			if s.kube == c {
				s.partitioned.Store(false)
				s.reached.Store(time.Now().UnixNano())
			}
		})
	case PartitionProvider:
		d := between(r, 5*time.Second, 90*time.Second)
		if !s.running() {
			tl("%s is down", s.name)
			return
		}
		l := s.link
		tl("%s cut from the provider for %s", s.name, d)
		l.cut.Store(true)
		n.later(d, "heal "+s.name+" to the provider", func(context.Context) {
			if s.link == l && s.running() {
				l.healed.Store(time.Now().UnixNano())
				l.cut.Store(false)
			}
		})
	case RestartAPIServer:
		if rs, ok := any(w.server).(interface{ Restart() }); ok {
			tl("restart")
			rs.Restart()
			return
		}
		tl("every watch ends")
		w.server.EndWatches()
	case DeleteLease:
		list, err := w.observer.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) == 0 {
			tl("no lease to delete (%v)", err)
			return
		}
		items := list.Items
		slices.SortFunc(items, func(a, b coordinationv1.Lease) int {
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
		l := items[r.IntN(len(items))]
		err = w.observer.CoordinationV1().Leases(l.Namespace).Delete(ctx, l.Name, metav1.DeleteOptions{})
		tl("%s/%s (%v)", l.Namespace, l.Name, err)
		if err == nil && l.Namespace != "kube-node-lease" {
			w.terms.leaseDeleted() // a node's heartbeat Lease is no term's
		}
	case OperatorEdit:
		e := w.cfg.Nemesis.Edits[r.IntN(len(w.cfg.Nemesis.Edits))]
		d := between(r, 20*time.Second, 2*time.Minute)
		err := e.Do(ctx, w.observer)
		tl("%s (%v)", e.Name, err)
		if e.Undo != nil {
			n.later(d, "undo "+e.Name, func(ctx context.Context) {
				if err := e.Undo(ctx, w.observer); err != nil {
					w.tl.add("nemesis", "undo %s: %v", e.Name, err)
				}
			})
		}
	case RollingUpgrade:
		d := between(r, 5*time.Second, 30*time.Second)
		next := s.releaseIndex + 1
		if !s.running() || next >= len(w.cfg.Gate.Releases) {
			tl("%s is down or at the newest release", s.name)
			return
		}
		to := w.cfg.Gate.Releases[next]
		tl("%s from %s to %s, back in %s", s.name, s.release.Release, to.Release, d)
		w.stop(s, false)
		s.releaseIndex, s.release = next, to
		n.later(d, "restart "+s.name+" at "+to.Release.String(), func(ctx context.Context) {
			if !s.running() && ctx.Err() == nil {
				w.start(ctx, s)
			}
		})
	case ClockDrift:
		rate := 1 + (2*r.Float64()-1)*w.cfg.Nemesis.MaxDrift
		tl("%s's clock runs at %.4f s per second from now on", s.name, rate)
		s.clock.setRate(rate)
	case ServiceChange:
		n.changeService(ctx, r, tl)
	case NamespaceDelete:
		n.deleteNamespace(ctx, r, tl)
	case SlowReads, SlowWrites:
		d, lag := between(r, 30*time.Second, 3*time.Minute), between(r, 100*time.Millisecond, 3*time.Second)
		if !s.running() {
			tl("%s is down", s.name)
			return
		}
		v := &s.slow.reads
		if k == SlowWrites {
			v = &s.slow.writes
		}
		c := s.kube
		tl("%s's requests wait %s, for %s", s.name, lag, d)
		v.Store(int64(lag))
		n.later(d, string(k)+" of "+s.name+" end", func(context.Context) {
			if s.kube == c {
				v.Store(0)
			}
		})
	case EmptyWatches:
		d := between(r, 30*time.Second, 3*time.Minute)
		if !s.running() {
			tl("%s is down", s.name)
			return
		}
		c := s.kube
		tl("every watch of %s ends at once, for %s", s.name, d)
		s.emptyWatches.Store(true)
		if !s.partitioned.Load() {
			c.Cut() // ends the watches open now, as the proxy closing them does
			c.Heal()
		}
		n.later(d, "watches of "+s.name+" last again", func(context.Context) {
			if s.kube == c {
				s.emptyWatches.Store(false)
			}
		})
	case ProviderRateLimit:
		verbs := []lbrecon.Verb{lbrecon.VerbList, lbrecon.VerbGet, lbrecon.VerbCreate, lbrecon.VerbDestroy}
		verb := verbs[r.IntN(len(verbs))]
		times, after := 1+r.IntN(30), time.Duration(r.IntN(11))*time.Second
		tl("next %d %s calls, Retry-After %s", times, verb, after)
		w.engine.RateLimit(verb, times, after)
	case ProviderOutage:
		d := between(r, 10*time.Second, 3*time.Minute)
		tl("for %s", d)
		w.engine.Unavailable(d)
	case ProviderFailCreate:
		times := 1 + r.IntN(5)
		tl("next %d creations", times)
		w.engine.FailCreate(func(lbrecon.Object) bool { return !w.quieting.Load() }, times, nil)
	case ProviderLostAnswer:
		k, d := 1+r.IntN(3), between(r, 30*time.Second, 3*time.Minute)
		tl("every %d. creation for %s", k, d)
		w.engine.LoseCreateAnswers(k)
		n.later(d, "creation answers kept again", func(context.Context) { w.engine.LoseCreateAnswers(0) })
	}
}

// clearActions empties the request logs of the clients (client-go's fake
// keeps every request it was sent), so that hours of simulated time take no
// more memory than minutes.
func (w *world) clearActions() {
	w.observer.ClearActions()
	for _, s := range w.agents {
		if s.running() {
			s.kube.ClearActions()
		}
	}
}
