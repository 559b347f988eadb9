package fleetsim

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// meter counts one run's requests to one server and checks them against
// the Budget: at most PerMinute in any minute of simulated time (kept in
// whole seconds), at most PerKind of one kind in any minute (apiserver
// requests only), and at most AtOnce without simulated time passing.
type meter struct {
	w      *world
	s      *slot
	server string
	// perKind turns on the budget of each kind of request.
	perKind bool

	mu      sync.Mutex
	instant time.Time // of the last request
	atOnce  int       // requests at that instant
	seconds [60]int   // requests in each of the last 60 seconds, by second mod 60
	second  int64     // the second seconds[second%60] counts
	over    bool      // reported already
	recent  []string  // what the last requests were, for the report
	kinds   map[string]*window
}

// window counts requests in the last 60 seconds of simulated time, by
// whole second.
type window struct {
	seconds [60]int // requests in each of the last 60 seconds, by second mod 60
	second  int64   // the second seconds[second%60] counts
	total   int     // the sum of seconds
}

// add counts one request in second sec and returns the count of the
// minute that ends with it.
func (c *window) add(sec int64) int {
	for c.second < sec {
		c.second++
		if sec-c.second >= 60 {
			c.second = sec - 60 // skip over idle minutes
			c.seconds, c.total = [60]int{}, 0
			continue
		}
		c.total -= c.seconds[c.second%60]
		c.seconds[c.second%60] = 0
	}
	c.seconds[sec%60]++
	c.total++
	return c.total
}

func newMeter(w *world, s *slot, server string, perKind bool) *meter {
	return &meter{w: w, s: s, server: server, perKind: perKind, kinds: map[string]*window{}}
}

// add counts one request, described by what, now.
func (m *meter) add(what string) {
	now := time.Now()
	m.mu.Lock()
	if len(m.recent) == 2*recentKept {
		m.recent = append(m.recent[:0], m.recent[recentKept:]...)
	}
	m.recent = append(m.recent, what)
	if now.Equal(m.instant) {
		m.atOnce++
	} else {
		m.instant, m.atOnce = now, 1
	}
	sec := now.Unix()
	for m.second < sec {
		m.second++
		if sec-m.second >= 60 {
			m.second = sec - 60 // skip over idle minutes
			m.seconds = [60]int{}
			continue
		}
		m.seconds[m.second%60] = 0
	}
	m.seconds[sec%60]++
	total := 0
	for _, n := range m.seconds {
		total += n
	}
	kind := 0
	if m.perKind {
		c := m.kinds[what]
		if c == nil {
			c = &window{second: sec}
			m.kinds[what] = c
		}
		kind = c.add(sec)
	}
	atOnce, over := m.atOnce, m.over
	b := m.w.cfg.Budget
	report := !over && (atOnce > b.AtOnce || total > b.PerMinute || kind > b.PerKind)
	if !report {
		m.mu.Unlock()
		return
	}
	m.over = true
	recent := summary(m.recent[max(0, len(m.recent)-recentKept):]) // only for the report: it costs more than the count
	m.mu.Unlock()
	if atOnce > b.AtOnce || kind > b.PerKind && atOnce >= kind {
		m.w.violate(RequestBudget, m.s.name, "%d requests to the %s at one instant of simulated time (a loop spins; budget %d); the last %d: %s",
			atOnce, m.server, b.AtOnce, recentKept, recent)
		return
	}
	if kind > b.PerKind {
		m.w.violate(RequestBudget, m.s.name, "%d requests %q to the %s within one minute (budget %d of one kind: a loop retries a persistent answer faster than once a second); the last %d: %s",
			kind, what, m.server, b.PerKind, recentKept, recent)
		return
	}
	m.w.violate(RequestBudget, m.s.name, "%d requests to the %s within one minute (budget %d); the last %d: %s", total, m.server,
		b.PerMinute, recentKept, recent)
}

// recentKept is how many of its last requests a meter describes.
const recentKept = 200

// summary counts the requests of each description, most frequent first.
func summary(reqs []string) string {
	counts := map[string]int{}
	for _, r := range reqs {
		counts[r]++
	}
	keys := slices.Collect(maps.Keys(counts))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(counts[b]-counts[a], strings.Compare(a, b)) })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d× %s", counts[k], k))
	}
	return strings.Join(parts, ", ")
}
