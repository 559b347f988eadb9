package fleetsim

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// ReplayRate runs seed runs times, each in a synctest bubble of its own
// inside a subtest of t, and returns the fraction of runs whose timeline
// is the first run's: the same entries at the same instants (log lines
// left out, random identities and provider ids masked, entries of one
// instant in any order), and a description of where the first run that
// differs parted from it ("" when none did). It measures how far Go's
// scheduler lets one seed replay (see the package documentation).
func ReplayRate(t *testing.T, cfg Config, seed uint64, runs int) (float64, string) {
	t.Helper()
	if cfg.Start.IsZero() {
		cfg.Start = time.Now().UTC().Truncate(24 * time.Hour)
	}
	cfg.Seed = seed
	var first []Entry
	same, parted := 0, ""
	for i := range runs {
		t.Run(fmt.Sprintf("run=%d", i), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				got := comparable(Simulate(t.Context(), cfg).Timeline)
				if i == 0 {
					first = got
				}
				if d := diverge(first, got); d == "" {
					same++
				} else if parted == "" {
					parted = d
				}
			})
		})
	}
	return float64(same) / float64(runs), parted
}

// randomID matches the random identities agents draw (a version gate's
// reaper identity), which differ between runs by design.
var randomID = regexp.MustCompile(`\b[0-9a-f]{16}\b`)

// providerID matches the ids lbrecontest hands out, in the order of the
// creations it serves: two creations one agent makes at one instant get
// them in the scheduler's order.
var providerID = regexp.MustCompile(`\bid-[0-9]{6}\b`)

// comparable drops the log lines of a timeline, masks its random
// identities and provider ids, and sorts the entries of each instant, whose order is the
// scheduler's.
func comparable(tl []Entry) []Entry {
	var out []Entry
	for _, e := range tl {
		if len(e.What) >= 4 && e.What[:4] == "log:" {
			continue
		}
		e.What = randomID.ReplaceAllString(e.What, "<id>")
		e.What = providerID.ReplaceAllString(e.What, "<provider-id>")
		out = append(out, e)
	}
	slices.SortStableFunc(out, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(a.Source, b.Source), cmp.Compare(a.What, b.What))
	})
	return out
}

// diverge describes the first entry where b parts from a, or returns "".
func diverge(a, b []Entry) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("entry %d: %q, then %q", i, a[i].String(), b[i].String())
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("%d entries, then %d", len(a), len(b))
	}
	return ""
}
