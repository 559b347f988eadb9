package lbrecon_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// Moves on read replicas: a load balancer moved from one ID to another
// while listings of either ID's objects go backwards within the declared
// lag (random per object and per listing, lost creation answers shown
// last), the old one moved away from mid-build (its lost creations show
// after the move) or resisting its teardown, the process crashing at a
// write and starting again with the journal, knowing only the new ID.
// Checked on every run: no object twice on one load balancer; the new
// address published only once the new load balancer is converged at the
// provider, and published while the old one is still there when it
// resists; once converged the move stays converged (a destroyed object a
// replica shows again is not believed back); past the lag nothing of the
// owner is left on the old ID; each journal entry is the scope's own (an
// old-ID creation never under the new ID's key, nor the other way round),
// and none is left once both are settled. All of it across restarts in
// the middle of a teardown too: the journal's destructions tell the next
// process what its predecessor destroyed, so it neither publishes early
// nor sends a destruction again, but one whose acceptance the crash kept
// from the journal, once.

const moveLag = 3 * time.Second

// scopeJournal is a FileJournal that checks every entry it is given: its
// scope is one of the load balancers' IDs and, for the kinds whose spec
// names the load balancer, that one; a destruction recorded before it is
// sent, of an object the provider still has, is under the scope of the
// load balancer the object is on. It counts the entries that break it.
type scopeJournal struct {
	*lbrecon.FileJournal
	ids []string
	on  func(lbrecon.Key) (string, bool) // the load balancer an object at the provider is on

	mu      sync.Mutex
	foreign []string // entries recorded or forgotten under another scope than their object's
}

func (j *scopeJournal) check(op string, intents []lbrecon.Intent, spec bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, in := range intents {
		ok := slices.Contains(j.ids, in.Scope)
		switch {
		case !ok || !spec:
		case in.ID != "":
			if id, found := j.on(lbrecon.Key{Kind: in.Kind, ID: in.ID}); found && !in.Destroyed {
				ok = id == in.Scope
			}
		case in.Kind == lbrecon.KindBackend || in.Kind == lbrecon.KindFrontend:
			field := "LoadBalancer:" + in.Scope
			i := strings.Index(in.Spec, field)
			ok = i >= 0 && strings.ContainsAny(in.Spec[i+len(field):][:1], " }")
		}
		if !ok {
			j.foreign = append(j.foreign, fmt.Sprintf("%s %q: %s/%s %s", op, in.Scope, in.Kind, in.Name, in.Spec))
		}
	}
}

func (j *scopeJournal) Record(ctx context.Context, intents []lbrecon.Intent) error {
	j.check("record", intents, true)
	return j.FileJournal.Record(ctx, intents)
}

func (j *scopeJournal) Forget(ctx context.Context, intents []lbrecon.Intent) error {
	j.check("forget", intents, false)
	return j.FileJournal.Forget(ctx, intents)
}

func (j *scopeJournal) broken() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.foreign)
}

// onID returns the objects among objs carrying tag on load balancer id.
func onID(objs []lbrecon.Object, id, tag string) []lbrecon.Object {
	var out []lbrecon.Object
	for _, o := range lbrecontest.OnLoadBalancer(objs, id) {
		if o.HasTag(tag) {
			out = append(out, o)
		}
	}
	return out
}

// destroyLog records the objects whose destruction the provider accepted.
type destroyLog struct {
	*lbrecontest.Engine
	mu        sync.Mutex
	destroyed map[lbrecon.Key]int  // by the process (gen) whose call the provider accepted
	gen       int                  // the process calling
	reissued  int                  // destructions sent again, by any process, after the provider accepted one
	before    func(lbrecon.Object) // called before each Destroy
}

func (d *destroyLog) Destroy(ctx context.Context, obj lbrecon.Object) error {
	d.mu.Lock()
	before := d.before
	if _, ok := d.destroyed[obj.Key()]; ok {
		d.reissued++
	}
	d.mu.Unlock()
	if before != nil {
		before(obj)
	}
	err := d.Engine.Destroy(ctx, obj)
	if err == nil {
		d.mu.Lock()
		d.destroyed[obj.Key()] = d.gen
		d.mu.Unlock()
	}
	return err
}

func (d *destroyLog) wasDestroyed(k lbrecon.Key) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.destroyed[k]
	return ok
}

// restart begins the next process, which knows its predecessor's
// destructions from the journal alone.
func (d *destroyLog) restart() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
}

func (d *destroyLog) reissues() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reissued
}

// dupsOn counts the objects of tag on load balancer id beyond the first of
// each kind and name: the two load balancers' objects share names.
func dupsOn(objs []lbrecon.Object, id, tag string) int {
	seen := map[string]bool{}
	n := 0
	for _, o := range onID(objs, id, tag) {
		k := o.Kind + "/" + o.Name
		if seen[k] {
			n++
		}
		seen[k] = true
	}
	return n
}

// wantStatus is the address-to-ports map a converged lb publishes.
func wantStatus(lb lbrecon.LoadBalancer) map[netip.Addr][]uint16 {
	st := map[netip.Addr][]uint16{}
	for _, a := range lb.Addresses {
		for _, p := range lb.Ports {
			st[a] = append(st[a], p.ExternalPort)
		}
		slices.Sort(st[a])
	}
	return st
}

type moveOutcome struct {
	dups, leaked, inconsistent, stuck, errs int
	foreign                                 []string // journal entries under another scope
	entriesLeft                             int      // journal entries left once all is settled, without a crash
	published, publishedEarly               int      // publications; those before the new load balancer converged
	publishedWhileOld                       int      // publications while the old one still had objects
	lateOnOld                               int      // old-ID objects no listing showed when the move began
	crashes, crashesMidWrite                int
	bounces                                 int // moves back to the old ID and forth again
	brokeEarly                              int // the other ID's objects destroyed before the wanted one was built
	reissued                                int // destructions sent again after the provider accepted one
	answersLost                             int // accepted destructions a crash kept from the journal as such
	shownAgain                              int // a converged move not converged on a later call
}

// moveRun moves one load balancer from lb-1 to lb-2 on read replicas,
// one pass at a time (once) or blocking, with seed's adversities.
func moveRun(t *testing.T, seed uint64, once bool) moveOutcome {
	var out moveOutcome
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(seed, 36))
		eng := lbrecontest.New(lbrecontest.Config{Latency: 20 * time.Millisecond, Pending: time.Second,
			ReplicaLag: moveLag, DeclareListLag: true, Seed: seed, DeleteDelay: 2 * time.Second,
			Integrity: true, UniqueBinds: true})
		eng.LoseCreateAnswers(3 + rng.IntN(4))
		dl := &destroyLog{Engine: eng, destroyed: map[lbrecon.Key]int{}}
		cr := lbrecontest.NewCrasher(dl)
		// dups counts the copies on either load balancer beyond the first
		// of each object, leaving out those being destroyed (the
		// provider's deletion takes its time: a copy made again meanwhile
		// is no duplicate).
		dups := func(objs []lbrecon.Object) int {
			objs = slices.DeleteFunc(objs, func(o lbrecon.Object) bool { return dl.wasDestroyed(o.Key()) })
			return dupsOn(objs, "lb-1", owner) + dupsOn(objs, "lb-2", owner)
		}
		path := filepath.Join(t.TempDir(), "journal")
		var journals []*scopeJournal
		on := func(k lbrecon.Key) (string, bool) {
			objs := eng.Objects()
			for _, id := range []string{"lb-1", "lb-2"} {
				if slices.ContainsFunc(onID(objs, id, owner), func(o lbrecon.Object) bool { return o.Key() == k }) {
					return id, true
				}
			}
			return "", false
		}
		newMoving := func(lb lbrecon.LoadBalancer) *lbrecon.Moving {
			j := &scopeJournal{FileJournal: lbrecon.NewFileJournal(path), ids: []string{"lb-1", "lb-2"}, on: on}
			journals = append(journals, j)
			m, err := lbrecon.NewMoving(lbrecon.Config{Engine: cr, Tag: owner, Journal: j}, lb)
			require.NoError(t, err)
			return m
		}
		oldLB := desc(2, 2, 3)
		newLB := moved(desc(2, 2, 3), "lb-2")
		newLB.Addresses = []netip.Addr{netip.MustParseAddr("203.0.113.1"), netip.MustParseAddr("203.0.113.2")}

		// The old load balancer: built, or moved away from right after a
		// pass, its creations of unknown outcome still to show.
		m := newMoving(oldLB)
		token := uint64(1)
		ctx := lbrecon.WithToken(t.Context(), token)
		for i := range 1 + rng.IntN(8) {
			if i > 0 {
				<-time.After(time.Second)
			}
			res, err := m.ReconcileOnce(ctx)
			require.NoError(t, err)
			if res.Converged {
				break
			}
		}
		listed, err := eng.List(t.Context(), lbrecon.Query{Tag: owner})
		require.NoError(t, err)
		out.lateOnOld = len(onID(eng.Objects(), "lb-1", owner)) - len(onID(listed, "lb-1", owner))
		resists := 0
		if rng.IntN(2) == 0 { // the old one resists its teardown for a while
			resists = 5 + rng.IntN(20)
			old := map[lbrecon.Key]bool{}
			for _, o := range onID(eng.Objects(), "lb-1", owner) {
				old[o.Key()] = true
			}
			eng.FailDestroy(func(o lbrecon.Object) bool { return old[o.Key()] }, resists)
		}
		require.NoError(t, m.SetLoadBalancer(newLB))

		// The host: calls until converged, publishes the current load
		// balancer's address once a check confirms it, and crashes at a
		// write now and then (less likely at each restart).
		// made reports whether lb is built at the provider: each of its
		// objects once, ok, leaving out those being destroyed.
		made := func(lb lbrecon.LoadBalancer) bool {
			objs := slices.DeleteFunc(eng.Objects(), func(o lbrecon.Object) bool { return dl.wasDestroyed(o.Key()) })
			return lbrecontest.Converged(lb, owner)(objs)
		}
		var wantMu sync.Mutex // want and out.brokeEarly, for the passes' destroys
		// Now and then the host changes its mind: back to the old ID
		// (its reconciler, with its memory of deletions, is current again
		// and builds what it was tearing down), then to the new one again.
		// It does so once the other ID's teardown began.
		want, bounce, bounceAt, returnAt := newLB, rng.IntN(3) == 0, -1, -1
		tearing := false // an object of the ID not wanted was destroyed
		otherID := func(id string) string { return map[string]string{"lb-1": "lb-2", "lb-2": "lb-1"}[id] }
		// Make before break: nothing of the other ID is destroyed before
		// the wanted load balancer is built.
		dl.mu.Lock()
		dl.before = func(o lbrecon.Object) {
			wantMu.Lock()
			w := want
			wantMu.Unlock()
			all := eng.Objects()
			if !slices.ContainsFunc(onID(all, otherID(w.ID), owner), func(x lbrecon.Object) bool { return x.Key() == o.Key() }) {
				return
			}
			wantMu.Lock()
			defer wantMu.Unlock()
			tearing = true
			if !made(w) {
				out.brokeEarly++
			}
		}
		dl.mu.Unlock()
		published := false
		publish := func(ctx context.Context) {
			if published {
				return
			}
			p, err := m.Current().Check(ctx)
			if err != nil || !p.Empty() {
				return
			}
			st, err := m.Current().Status(ctx)
			if err != nil {
				return
			}
			published = true
			out.published++
			objs := eng.Objects()
			if !made(want) {
				out.publishedEarly++
				t.Logf("published before the new load balancer converged: %s", describeOn(objs, want.ID))
			}
			require.Equal(t, wantStatus(want), st, "the published address")
			if len(onID(objs, otherID(want.ID), owner)) > 0 {
				out.publishedWhileOld++
			}
		}
		convergedAt := time.Time{}
		restarts := 0
		for calls := 0; ; calls++ {
			if calls == 400 {
				out.stuck++
				t.Logf("not converged: %s", describeOn(eng.Objects(), ""))
				break
			}
			wantMu.Lock()
			if bounce && bounceAt < 0 && tearing {
				bounceAt, returnAt = calls, calls+1+rng.IntN(6)
				out.bounces++
			}
			wantMu.Unlock()
			if calls == bounceAt || calls == returnAt {
				wantMu.Lock()
				want = map[bool]lbrecon.LoadBalancer{true: oldLB, false: newLB}[calls == bounceAt]
				wantMu.Unlock()
				require.NoError(t, m.SetLoadBalancer(want))
				published, convergedAt = false, time.Time{}
			}
			pctx, cancel := context.WithCancel(lbrecon.WithToken(t.Context(), token))
			if restarts < 3 && convergedAt.IsZero() && rng.IntN(6+4*restarts) == 0 {
				crashed := cr.Arm(1+rng.IntN(6), rng.IntN(2) == 0)
				go func() {
					select {
					case <-crashed:
						cancel()
					case <-pctx.Done():
					}
				}()
			}
			var res lbrecon.Result
			var err error
			if once {
				res, err = m.ReconcileOnce(pctx)
			} else {
				err = m.Reconcile(pctx)
				res.Converged, res.RequeueAfter = err == nil, time.Second
			}
			select {
			case <-cr.Crashed():
				cancel()
				out.crashes++
				if cr.Sent() > 0 {
					out.crashesMidWrite++
				}
				// The destructions the provider accepted that the
				// journal does not hold as such (their answer came after
				// the crash point, or the process died before recording
				// it): the next process sends them again, once.
				left, err := lbrecon.NewFileJournal(path).Load(t.Context())
				require.NoError(t, err)
				for _, in := range left {
					if in.ID != "" && !in.Destroyed && dl.wasDestroyed(lbrecon.Key{Kind: in.Kind, ID: in.ID}) {
						out.answersLost++
					}
				}
				cr.Restart()
				// The next process: a new term, its journal, and only the
				// ID it wants.
				restarts++
				token++
				dl.restart()
				m, published = newMoving(want), false
				continue
			default:
			}
			if err != nil {
				cr.Arm(0, false)
				publish(pctx) // whatever the old one does
				cancel()
				if errors.Is(err, lbrecon.ErrInconsistent) {
					out.inconsistent++
					t.Logf("ErrInconsistent: %v", err)
				}
				out.errs++
				<-time.After(time.Second) // the host's error backoff
				continue
			}
			cr.Arm(0, false)
			publish(pctx)
			cancel()
			objs := eng.Objects()
			if d := dups(objs); d > 0 {
				t.Logf("call %d, %d duplicates: %s", calls, d, describeOn(objs, ""))
				out.dups = max(out.dups, d)
			}
			if res.Converged {
				if !published {
					out.publishedEarly++ // converged and not publishable
				}
				if convergedAt.IsZero() {
					convergedAt = time.Now()
				}
			} else if !convergedAt.IsZero() {
				out.shownAgain++
				t.Logf("converged, then not: %+v", res.Plan)
			}
			if !convergedAt.IsZero() && time.Since(convergedAt) > 2*moveLag && calls > returnAt {
				break
			}
			wait := time.Second // a host may call before RequeueAfter, and calls a converged one again
			if res.RequeueAfter > 0 {
				wait = min(res.RequeueAfter, wait)
			}
			<-time.After(wait)
		}
		<-time.After(2 * moveLag) // past the lag: listings tell the truth
		objs := eng.Objects()
		out.dups = max(out.dups, dups(objs))
		out.leaked = len(onID(objs, "lb-1", owner))
		if !lbrecontest.Converged(newLB, owner)(objs) {
			out.leaked++
		}
		out.reissued = dl.reissues()
		for _, j := range journals {
			out.foreign = append(out.foreign, j.broken()...)
		}
		if restarts == 0 {
			left, err := lbrecon.NewFileJournal(path).Load(t.Context())
			require.NoError(t, err)
			out.entriesLeft = len(left)
		}
		if out.leaked > 0 || out.dups > 0 {
			t.Logf("seed %d: %s", seed, describeOn(objs, ""))
		}
	})
	return out
}

// describeOn lists the owned objects on id ("" for both load balancers).
func describeOn(objs []lbrecon.Object, id string) string {
	var b strings.Builder
	for _, lbID := range []string{"lb-1", "lb-2"} {
		if id != "" && lbID != id {
			continue
		}
		fmt.Fprintf(&b, "%s:", lbID)
		for _, o := range onID(objs, lbID, owner) {
			fmt.Fprintf(&b, " %s/%s(%s)", o.Kind, o.Name, o.State)
		}
		b.WriteString("; ")
	}
	return b.String()
}

func TestMovingOnReplicas(t *testing.T) {
	runs := 60
	if testing.Short() {
		runs = 6
	}
	for _, once := range []bool{true, false} {
		t.Run(map[bool]string{true: "ReconcileOnce", false: "Reconcile"}[once], func(t *testing.T) {
			var total moveOutcome
			for seed := range uint64(runs) {
				var o moveOutcome
				t.Run(fmt.Sprint(seed), func(t *testing.T) { o = moveRun(t, seed, once) })
				total.dups += o.dups
				total.leaked += o.leaked
				total.inconsistent += o.inconsistent
				total.stuck += o.stuck
				total.errs += o.errs
				total.foreign = append(total.foreign, o.foreign...)
				total.entriesLeft += o.entriesLeft
				total.published += o.published
				total.publishedEarly += o.publishedEarly
				total.publishedWhileOld += o.publishedWhileOld
				total.lateOnOld += o.lateOnOld
				total.crashes += o.crashes
				total.crashesMidWrite += o.crashesMidWrite
				total.shownAgain += o.shownAgain
				total.bounces += o.bounces
				total.brokeEarly += o.brokeEarly
				total.reissued += o.reissued
				total.answersLost += o.answersLost
				require.LessOrEqual(t, o.reissued, o.answersLost, "seed %d: destructions sent again, beyond those whose answer a crash lost", seed)
			}
			t.Logf("%d moves (%d back and forth): %d crashes (%d after a write), %d old-ID objects unlisted at the move, %d publications (%d while the old one stood, %d early), %d duplicates, %d leaked, %d stuck, %d errors (%d ErrInconsistent), %d converged then not, %d old objects destroyed early, %d destructions sent again (%d accepted ones a crash kept from the journal), %d journal entries under another scope, %d left",
				runs, total.bounces, total.crashes, total.crashesMidWrite, total.lateOnOld, total.published, total.publishedWhileOld, total.publishedEarly,
				total.dups, total.leaked, total.stuck, total.errs, total.inconsistent, total.shownAgain, total.brokeEarly, total.reissued, total.answersLost, len(total.foreign), total.entriesLeft)
			require.Zero(t, total.dups, "duplicates")
			require.Zero(t, total.leaked, "leaked or not converged")
			require.Zero(t, total.stuck)
			require.Zero(t, total.inconsistent)
			require.Zero(t, total.publishedEarly)
			require.Zero(t, total.brokeEarly, "the old load balancer's objects destroyed before the new one was built")
			require.Zero(t, total.shownAgain)
			// A destruction is sent again only when a crash kept its
			// acceptance from the journal (checked per seed above).
			require.LessOrEqual(t, total.reissued, total.answersLost, "destructions sent again")
			if n := len(total.foreign); n > 0 {
				t.Fatalf("%d journal entries under another scope, such as %q", n, total.foreign[:min(n, 3)])
			}
			require.Zero(t, total.entriesLeft, "journal entries left")
			// The adversities did happen.
			require.Positive(t, total.crashesMidWrite)
			require.Positive(t, total.lateOnOld, "no old-ID creation was unlisted when the move began")
			if once {
				// A blocking Reconcile returns once the old one is gone.
				require.Positive(t, total.publishedWhileOld, "never published while the old load balancer stood")
			}
		})
	}
}
