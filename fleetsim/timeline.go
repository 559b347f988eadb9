package fleetsim

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// Entry is one line of a run's timeline: what happened, to whom, and when,
// in simulated time since the run began.
type Entry struct {
	At     time.Duration // simulated time since the run began
	Source string        // "nemesis", an agent's name, "provider", "apiserver", "check"
	What   string
}

// String formats e as one timeline line.
func (e Entry) String() string {
	return fmt.Sprintf("%12s  %-10s %s", e.At.Truncate(time.Millisecond), e.Source, e.What)
}

// timeline is the run's history, appended to by the nemesis, the agents'
// lifecycle and the observers. It is safe for concurrent use.
type timeline struct {
	start time.Time
	mu    sync.Mutex
	lines []Entry
}

// add appends an entry stamped with the current simulated time and returns it.
func (tl *timeline) add(source, format string, args ...any) Entry {
	e := Entry{At: time.Since(tl.start), Source: source, What: fmt.Sprintf(format, args...)}
	tl.mu.Lock()
	tl.lines = append(tl.lines, e)
	tl.mu.Unlock()
	return e
}

func (tl *timeline) entries() []Entry {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]Entry(nil), tl.lines...)
}

// Window returns the lines of entries from before to after around at,
// formatted one per line.
func Window(entries []Entry, at, before, after time.Duration) string {
	var b strings.Builder
	for _, e := range entries {
		if e.At >= at-before && e.At <= at+after {
			b.WriteString(e.String())
			b.WriteByte('\n')
		}
	}
	return b.String()
}
