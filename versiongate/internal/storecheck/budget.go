package storecheck

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// Budget bounds the store calls each node makes (each run of a node, as
// the drivers name its client) in any Window of the run, by kind: reads
// of the status, status watches started, listings, record watches
// started, and all calls together. A loop that spins or herds (a status
// watch from a revision the server no longer serves, answered 410 and
// read again every 100ms; a readiness wait retrying a failing read at a
// fixed pace) goes past it; the loops' budgets (BUDGETS.md: after 30s of
// the same answer, at most one request a second per loop) stay well
// within it. The store sends one request for each call counted here, or
// a fixed few (the Kubernetes store's keep-alive reads and updates), so a
// budget on calls is one on requests.
type Budget struct {
	// Window is the span counted (default 10s).
	Window time.Duration
	// Reads, StatusWatches, Lists and RecordWatches bound the calls of
	// each kind in a window; Total bounds every call. Zero takes the
	// defaults (DefaultBudget).
	Reads, StatusWatches, Lists, RecordWatches, Total int
}

// DefaultBudget is the budget the drivers hold nodes to, for records kept
// alive every ttl/3: per 10s, at most 30 status reads and 30 status
// watches (three a second; a waiting node's loop makes at most one
// of each a second once it backs off, and a leader a few per term), 30
// listings and 30 record watches, and 60 calls in all besides the
// keep-alives.
func DefaultBudget(ttl time.Duration) Budget {
	keepAlives := int(10*time.Second/max(ttl/3, 100*time.Millisecond)) + 1
	return Budget{Window: 10 * time.Second, Reads: 30, StatusWatches: 30, Lists: 30, RecordWatches: 30, Total: 60 + keepAlives}
}

func (b Budget) withDefaults(ttl time.Duration) Budget {
	d := DefaultBudget(ttl)
	if b.Window == 0 {
		b.Window = d.Window
	}
	for _, f := range []struct{ v, d *int }{{&b.Reads, &d.Reads}, {&b.StatusWatches, &d.StatusWatches}, {&b.Lists, &d.Lists}, {&b.RecordWatches, &d.RecordWatches}, {&b.Total, &d.Total}} {
		if *f.v == 0 {
			*f.v = *f.d
		}
	}
	return b
}

// budgetKinds are the kinds Budget bounds, besides the total.
var budgetKinds = []struct {
	name  string
	match func(Input) bool
	limit func(Budget) int
}{
	{"status reads", func(in Input) bool { return in.Kind == KindRead }, func(b Budget) int { return b.Reads }},
	{"status watches", func(in Input) bool { return in.Kind == KindWatch && in.Status }, func(b Budget) int { return b.StatusWatches }},
	{"listings", func(in Input) bool { return in.Kind == KindList }, func(b Budget) int { return b.Lists }},
	{"record watches", func(in Input) bool { return in.Kind == KindWatch && !in.Status }, func(b Budget) int { return b.RecordWatches }},
	{"calls", func(in Input) bool { return true }, func(b Budget) int { return b.Total }},
}

// Busiest is what CheckBudget found for one client and kind: the most
// calls in one window, and when that window started.
type Busiest struct {
	Client, Kind string
	Calls, Limit int
	From         time.Duration
}

// CheckBudget fails t for every client that made more of calls (see
// Recorder.Calls) than b allows in some window, and logs each kind's
// busiest client. Calls are counted when made, whatever their outcome;
// the observer, whose calls are the drivers' own checks, is not counted.
func CheckBudget(t testing.TB, calls []Op, b Budget) []Busiest {
	t.Helper()
	byClient := map[string][]Op{}
	for _, o := range calls {
		if o.Name == "observer" {
			continue
		}
		byClient[o.Name] = append(byClient[o.Name], o)
	}
	var res []Busiest
	for _, k := range budgetKinds {
		top := Busiest{Kind: k.name, Limit: k.limit(b)}
		for _, name := range slices.Sorted(maps.Keys(byClient)) {
			var calls []time.Duration
			for _, o := range byClient[name] {
				if k.match(o.Input) {
					calls = append(calls, o.Call)
				}
			}
			slices.Sort(calls)
			n, from := busiest(calls, b.Window)
			if n > top.Calls {
				top = Busiest{Client: name, Kind: k.name, Calls: n, Limit: top.Limit, From: from}
			}
			if n > top.Limit {
				t.Errorf("request budget: %s made %d %s in %v from %v, over the budget of %d: a loop spins or herds", name, n, k.name, b.Window, from.Round(time.Millisecond), top.Limit)
			}
		}
		res = append(res, top)
	}
	var parts []string
	for _, r := range res {
		parts = append(parts, fmt.Sprintf("%s %d/%d (%s)", r.Kind, r.Calls, r.Limit, r.Client))
	}
	t.Logf("request budget: busiest node per %v: %s", b.Window, strings.Join(parts, ", "))
	return res
}

// busiest returns the most of the sorted times in one window, and the
// window's start.
func busiest(times []time.Duration, window time.Duration) (int, time.Duration) {
	best, from := 0, time.Duration(0)
	j := 0
	for i, t := range times {
		for times[j] <= t-window {
			j++
		}
		if n := i - j + 1; n > best {
			best, from = n, times[j]
		}
	}
	return best, from
}
