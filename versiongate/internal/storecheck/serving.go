package storecheck

import (
	"fmt"
	"strings"
	"time"

	"github.com/reconkit/reconkit/versiongate"
)

// check asks every running node below the highest minimum compatible
// release of the upgrade whether it is ready, between two reads of the
// status, and notes each that is while either read shows a minimum above
// its release: a sighting, judged against the history of status writes
// once the run ends (see judgeSighting). The reads alone cannot judge
// it: the status may change between a read and the question (a leader
// of a lower release lowers the minimum, and the node passes WaitReady
// on that), and on a store that validates a conditioned write after
// applying it a restricted status is seen while a node whose record the
// leader's listing missed still serves, until the write is put back.
func (h *rolling) check() { h.checkFrom(h.readStatus()) }

// checkFrom is check with first as the status read before the question.
func (h *rolling) checkFrom(first statusRead) {
	h.checks.Add(1)
	h.mu.Lock()
	type asked struct {
		n               *rollingNode
		asked, answered time.Duration
	}
	var ready []asked
	for _, n := range h.nodes {
		if !n.running || !releases[n.rel].version.Less(highestMinimum()) {
			continue
		}
		a := asked{n: n, asked: h.rec.now()}
		ok := n.gate.Ready()
		a.answered = h.rec.now()
		if ok {
			ready = append(ready, a)
		}
	}
	names := make([]string, len(ready))
	rels := make([]versiongate.Release, len(ready))
	readyAt := make([]time.Duration, len(ready))
	for i, a := range ready {
		names[i] = fmt.Sprintf("%s#%d", a.n.id, a.n.runs)
		rels[i] = releases[a.n.rel].version
		readyAt[i] = a.n.readyAt
	}
	h.mu.Unlock()
	if len(ready) == 0 {
		return
	}
	second := h.readStatus()
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, a := range ready {
		below := func(r statusRead) bool { return r.ok && rels[i].Less(r.status.MinimumCompatibleRelease) }
		if !below(first) && !below(second) {
			continue
		}
		h.sightings = append(h.sightings, sighting{node: names[i], release: rels[i], readyAt: readyAt[i],
			first: first, second: second, asked: a.asked, answered: a.answered})
	}
}

// writeOutcomes counts the status writes of h by outcome; those
// conditioned on the records apart.
func writeOutcomes(h []Op) map[string]int {
	n := map[string]int{}
	for _, o := range h {
		if o.Input.Kind != KindWrite {
			continue
		}
		k := string(o.Output.Outcome)
		if o.Input.NodesRev > 0 {
			k = "conditioned " + k
		}
		n[k]++
	}
	return n
}

// highestMinimum is the highest minimum compatible release of the
// upgrade's releases.
func highestMinimum() versiongate.Release {
	var m versiongate.Release
	for _, r := range releases {
		m = maxOf(m, r.minCompat)
	}
	return m
}

func maxOf(a, b versiongate.Release) versiongate.Release {
	if a.Less(b) {
		return b
	}
	return a
}

// readStatus reads the status for check, and notes a corrupt one.
func (h *rolling) readStatus() statusRead {
	r := statusRead{call: h.rec.now()}
	st, err := h.obs.ReadStatus(h.ctx)
	r.ret = h.rec.now()
	if err != nil {
		return r
	}
	return h.decoded(r, st)
}

// decoded fills r from st, and notes a corrupt status.
func (h *rolling) decoded(r statusRead, st versiongate.StoredStatus) statusRead {
	if st.Value == nil {
		return r
	}
	r.value, r.rev = string(st.Value), st.Revision
	cur, err := versiongate.DecodeStatus(st.Value)
	if err != nil {
		h.mu.Lock()
		h.violations = append(h.violations, fmt.Sprintf("corrupt status at revision %d: %v", st.Revision, err))
		h.mu.Unlock()
		return r
	}
	r.ok, r.status = true, cur
	return r
}

// judgeSightings judges every sighting against the history, notes the
// violations, logs how many sightings each verdict excused and returns
// those counts. The caller holds h.mu.
func (h *rolling) judgeSightings(hist []Op) map[verdict]int {
	counts := map[verdict]int{}
	for _, s := range h.sightings {
		v, w := judgeSighting(s, hist)
		counts[v]++
		switch {
		case v == served:
			h.violations = append(h.violations, explain(s, w, hist))
		case counts[v] <= 3:
			h.t.Logf("rolling upgrade: not a violation (%s): %s", v, explain(s, w, hist))
		}
	}
	if len(h.sightings) > 0 {
		h.t.Logf("rolling upgrade: %d times a node below the minimum of a status read around it was ready: %v", len(h.sightings), counts)
	}
	return counts
}

// sighting is a node the rolling driver's check saw ready while its
// release is below the minimum compatible release of the status the
// check read just before (first) and just after (second) it asked the
// node. Whether that is a violation depends on the status that stood
// when the node was asked, which the reads alone cannot tell: see
// judgeSighting.
type sighting struct {
	node    string // the node's client: its ID and run
	release versiongate.Release
	// readyAt is when the node's WaitReady last returned.
	readyAt time.Duration
	// first and second are the status reads around the question.
	first, second statusRead
	// asked and answered bound the node's Ready call.
	asked, answered time.Duration
}

// statusRead is one status read of the check.
type statusRead struct {
	call, ret time.Duration
	value     string
	rev       int64
	ok        bool // the read succeeded and the status decoded
	status    versiongate.Status
}

// verdict classifies a sighting against the history of status writes.
type verdict int

const (
	// served: the status read before and after the question was written
	// by a write that returned OK (so, on a store that validates after
	// writing, validated) before the first read was called, and no other
	// status write could have taken effect from that write's call until
	// the second read returned: the node was ready while a status that
	// excludes its release stood. A violation.
	served verdict = iota + 1
	// refusedWrite: the status was written by a write that did not
	// return OK (refused for changed nodes, or of unknown outcome; on a
	// store that validates after writing, readers see it until it is put
	// back): no leader acts on it, and a node that passed WaitReady
	// before it may still serve.
	refusedWrite
	// unreturnedWrite: the status was written by a write that had not
	// yet returned when the status was first read: the store may still
	// be validating it.
	unreturnedWrite
	// changed: the two reads differ, or another status write may have
	// taken effect between them, so the status at the question is not
	// known (a read older than the question, a status lowered by a later
	// leader, a write put back).
	changed
)

func (v verdict) String() string {
	switch v {
	case served:
		return "served under a validated status"
	case refusedWrite:
		return "status of a write that did not return OK"
	case unreturnedWrite:
		return "status of a write still in progress"
	case changed:
		return "status changed around the question"
	}
	return "unknown"
}

// judgeSighting decides s against the history h. It returns the verdict
// and, for served, the write that stood.
//
// Why not the status read alone: the read is made before the question,
// and the status may change in between (a later leader of a lower
// release lowers the minimum, and the node passes WaitReady on the
// lowered status; a watch delivers an old status late). And on a store
// that validates a conditioned write after applying it (the Kubernetes
// store), a restricted status is seen while it is validated and put back
// if a record changed: a node that passed WaitReady on the status before
// it, whose record the leader's listing missed, serves meanwhile, as
// designed; only a write that returned OK is one a leader acts on.
func judgeSighting(s sighting, h []Op) (verdict, Op) {
	if !s.first.ok || !s.second.ok || s.first.value != s.second.value {
		return changed, Op{}
	}
	// The writes that may have put the value read: any write of it
	// that may have been applied (not refused by the fence, nor, on a
	// store whose writes are atomic, for changed nodes), called before
	// the first read returned; the latest of them put it.
	var w Op
	found := false
	for _, o := range h {
		if !mayApply(o) || o.Call > s.first.ret {
			continue
		}
		if o.Input.Value == s.first.value && (!found || o.Call > w.Call) {
			w, found = o, true
		}
	}
	if !found {
		return changed, Op{}
	}
	switch {
	case w.Output.Outcome != OK:
		return refusedWrite, w
	case w.Return > s.first.call:
		return unreturnedWrite, w
	}
	// No other write may have taken effect between w and the second
	// read: a fence puts back only a status a later write left marked.
	for _, o := range h {
		if !mayApply(o) || o.Call == w.Call && o.Client == w.Client {
			continue
		}
		if o.Call < s.second.ret && o.Return > w.Call {
			return changed, w
		}
	}
	return served, w
}

// mayApply reports whether o is a status write that may have changed the
// status, if only for a while.
func mayApply(o Op) bool {
	if o.Input.Kind != KindWrite {
		return false
	}
	switch o.Output.Outcome {
	case Lost, NodesChanged:
		// Refused: on a store that validates a conditioned write after
		// applying it, readers may have seen it until it was put back
		// (by the writer, or by the next term's fence).
		return o.Input.Tentative && o.Input.NodesRev > 0
	}
	return true
}

// explain describes a served sighting with what the history says of the
// node: its publishes and keep-alives, and the listing the write was
// conditioned on.
func explain(s sighting, w Op, h []Op) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s@%s ready between %v and %v (WaitReady returned at %v) under %s (revision %d, read at %v..%v), then %s (revision %d, read at %v..%v)",
		s.node, s.release, s.asked, s.answered, s.readyAt, s.first.status, s.first.rev, s.first.call, s.first.ret, s.second.status, s.second.rev, s.second.call, s.second.ret)
	if w.Input.Kind == KindWrite {
		ret := "open"
		if w.Return != Open {
			ret = w.Return.String()
		}
		fmt.Fprintf(&b, "; written by %s at %v..%s, %s, conditioned on revision %d", w.Name, w.Call, ret, w.Output.Outcome, w.Input.NodesRev)
	}
	id, _, _ := strings.Cut(s.node, "#")
	var lastOK, firstLost *Op
	for i, o := range h {
		switch {
		case o.Name == s.node && o.Input.Kind == KindPublish:
			fmt.Fprintf(&b, "; its publish %s at %v..%v", o, o.Call, o.Return)
		case o.Name == s.node && o.Input.Kind == KindKeepAlive && o.Output.Outcome == OK && o.Call < s.asked:
			lastOK = &h[i]
		case o.Name == s.node && o.Input.Kind == KindKeepAlive && o.Output.Outcome != OK && firstLost == nil:
			firstLost = &h[i]
		case o.Input.Kind == KindList && o.Output.Rev == w.Input.NodesRev:
			listed := false
			for _, r := range o.Output.Records {
				listed = listed || r.ID == id
			}
			fmt.Fprintf(&b, "; the listing at revision %d by %s at %v..%v shows %s: %v", o.Output.Rev, o.Name, o.Call, o.Return, id, listed)
		}
	}
	if lastOK != nil {
		fmt.Fprintf(&b, "; its last keep-alive acknowledged before: called at %v, returned at %v", lastOK.Call, lastOK.Return)
	} else {
		b.WriteString("; no keep-alive of it acknowledged before")
	}
	if firstLost != nil {
		fmt.Fprintf(&b, "; its first keep-alive not acknowledged: %s at %v..%v", firstLost, firstLost.Call, firstLost.Return)
	}
	return b.String()
}
