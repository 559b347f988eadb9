package fleetsim

import (
	"sync"
	"time"
)

// meter counts one run's requests to one server and checks them against
// the Budget: at most PerMinute in any minute of simulated time (kept in
// whole seconds), and at most AtOnce without simulated time passing.
type meter struct {
	w      *world
	s      *slot
	server string

	mu      sync.Mutex
	instant time.Time // of the last request
	atOnce  int       // requests at that instant
	seconds [60]int   // requests in each of the last 60 seconds, by second mod 60
	second  int64     // the second seconds[second%60] counts
	over    bool      // reported already
}

func newMeter(w *world, s *slot, server string) *meter {
	return &meter{w: w, s: s, server: server}
}

// add counts one request now.
func (m *meter) add() {
	now := time.Now()
	m.mu.Lock()
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
	atOnce, over := m.atOnce, m.over
	b := m.w.cfg.Budget
	report := !over && (atOnce > b.AtOnce || total > b.PerMinute)
	if report {
		m.over = true
	}
	m.mu.Unlock()
	if !report {
		return
	}
	if atOnce > b.AtOnce {
		m.w.violate(RequestBudget, m.s.name, "%d requests to the %s at one instant of simulated time (a loop spins; budget %d)",
			atOnce, m.server, b.AtOnce)
		return
	}
	m.w.violate(RequestBudget, m.s.name, "%d requests to the %s within one minute (budget %d)", total, m.server, b.PerMinute)
}
