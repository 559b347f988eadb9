package versiongate

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/internal/event"
)

// Releases summarises the releases of the member nodes at one store
// revision. Min and Max include the local node's release, so they are
// defined even when no record exists.
type Releases struct {
	Min, Max Release
	// Revision is the store revision at which the summary is complete:
	// the watcher has applied every change of the node records up to and
	// including it.
	Revision int64
	// Nodes is the number of member records counted.
	Nodes int
}

// tracker keeps per-release counts of the member nodes and publishes a
// Releases summary after each batch of changes. Its maps are owned by the
// watcher goroutine; blocking is shared under mu.
type tracker struct {
	local     Release
	minCompat Release
	decode    DecodeFunc
	out       *event.Value[Releases]
	// onBlocking, if set, is called by the watcher goroutine when the
	// number of blocking nodes changed.
	onBlocking   func(int)
	lastBlocking int

	rev    int64
	nodes  map[string]Release // ID -> release, members only
	counts map[Release]int

	mu       sync.Mutex
	blocking map[string]Release // node ID -> release below minCompat
	unknown  map[string]bool    // blocking nodes whose record does not decode
}

func newTracker(local, minCompat Release, decode DecodeFunc, out *event.Value[Releases]) *tracker {
	t := &tracker{local: local, minCompat: minCompat, decode: decode, out: out}
	t.reset()
	return t
}

func (t *tracker) reset() {
	t.rev = 0
	t.nodes = make(map[string]Release)
	t.counts = make(map[Release]int)
	t.mu.Lock()
	t.blocking = make(map[string]Release)
	t.unknown = make(map[string]bool)
	t.mu.Unlock()
}

// update applies one record: its current value, or a deletion when value
// is empty and the record is not corrupt. A record whose value does not
// decode, or that the store reports corrupt, counts as a member of
// unknown release (the zero release, below every minimum): its node may
// be one that still serves an old release, so it blocks every
// restriction until it decodes again or goes.
func (t *tracker) update(log logr.Logger, r Record) {
	id := r.ID
	if prev, ok := t.nodes[id]; ok {
		delete(t.nodes, id)
		if t.counts[prev]--; t.counts[prev] == 0 {
			delete(t.counts, prev)
		}
		if prev.Less(t.minCompat) {
			t.mu.Lock()
			delete(t.blocking, id)
			delete(t.unknown, id)
			t.mu.Unlock()
		}
	}
	if len(r.Value) == 0 && r.Corrupt == nil {
		return
	}
	err := r.Corrupt
	var rel Release
	member := true
	if err == nil {
		rel, member, err = t.decode(id, r.Value)
	}
	unknown := err != nil
	if unknown {
		log.Error(err, "Node record does not decode: counting it as a node of unknown release, which blocks every restriction until it decodes or goes", "id", id)
		rel, member = Release{}, true
	}
	if !member {
		return
	}
	t.nodes[id] = rel
	t.counts[rel]++
	if rel.Less(t.minCompat) {
		t.mu.Lock()
		t.blocking[id] = rel
		if unknown {
			t.unknown[id] = true
		}
		t.mu.Unlock()
	}
}

func (t *tracker) publish() {
	if t.onBlocking != nil {
		t.mu.Lock()
		n := len(t.blocking)
		t.mu.Unlock()
		if n != t.lastBlocking {
			t.lastBlocking = n
			t.onBlocking(n)
		}
	}
	r := Releases{Min: t.local, Max: t.local, Revision: t.rev, Nodes: len(t.nodes)}
	for rel := range t.counts {
		r.Min = minRelease(r.Min, rel)
		r.Max = maxRelease(r.Max, rel)
	}
	t.out.Set(r)
}

// Blocking returns the member nodes whose release is below the minimum
// compatible release, sorted by ID.
func (t *tracker) blockingNodes() []Node {
	t.mu.Lock()
	out := make([]Node, 0, len(t.blocking))
	for id, rel := range t.blocking {
		out = append(out, Node{ID: id, Release: rel, Unknown: t.unknown[id]})
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b Node) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return out
}

// run lists the records, then watches them from the next revision,
// publishing after every batch. When the watch fails (compaction, a lost
// leader, a closed channel, an end with no error) it lists again, after a
// pause that doubles while watches deliver nothing, instead of giving up. It returns
// only when ctx ends.
func (t *tracker) run(ctx context.Context, st Store, clk clock.Clock, r func() float64) error {
	log := logr.FromContextOrDiscard(ctx)
	wait := pauseBase
	for {
		err := backoff.Retry(ctx, func(ctx context.Context) error { return t.list(ctx, st) },
			backoff.WithClock(clk), backoff.WithRand(r), backoff.WithName("versiongate: list nodes"))
		if err != nil {
			return err
		}
		t.publish()
		delivered := false
		err = t.watch(ctx, log, st, &delivered)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// A watch that ends at once (an EOF from a proxy, a store that
		// returns nil) must not make a listing loop: pause before listing
		// again, from pauseBase doubling up to pauseMax while watches
		// deliver nothing, jittered: a server restart ends every node's
		// watch at one instant.
		if delivered {
			wait = pauseBase
		}
		pause := jittered(r, wait)
		log.Info("Node watch ended, listing nodes again", "reason", fmt.Sprint(err), "revision", t.rev, "after", pause.String())
		select {
		case <-clk.After(pause):
		case <-ctx.Done():
			return ctx.Err()
		}
		wait = min(2*wait, pauseMax)
	}
}

// list reads every record at one revision.
func (t *tracker) list(ctx context.Context, st Store) error {
	log := logr.FromContextOrDiscard(ctx)
	records, rev, err := st.ListRecords(ctx)
	if err != nil {
		return err
	}
	t.reset()
	for _, r := range records {
		t.update(log, r)
	}
	t.rev = rev
	return nil
}

// watch applies the changes after t.rev until the watch fails or ctx ends.
// delivered is set when a batch arrived.
func (t *tracker) watch(ctx context.Context, log logr.Logger, st Store, delivered *bool) error {
	return st.WatchRecords(ctx, t.rev, func(changes []Record, rev int64) {
		*delivered = true
		for _, r := range changes {
			t.update(log, r)
		}
		t.rev = max(t.rev, rev)
		t.publish()
	})
}
