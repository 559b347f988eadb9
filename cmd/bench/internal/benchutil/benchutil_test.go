package benchutil

import (
	"testing"
	"time"
)

func TestPct(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	for p, want := range map[int]time.Duration{0: 1, 20: 1, 21: 2, 50: 3, 99: 5, 100: 5} {
		if got := Pct(ds, p); got != want {
			t.Errorf("Pct(%d) = %v, want %v", p, got, want)
		}
	}
	if got := Pct(nil, 50); got != 0 {
		t.Errorf("Pct(nil) = %v", got)
	}
}

func TestRatio(t *testing.T) {
	for _, c := range []struct {
		a, b float64
		want string
	}{{0, 0, "-"}, {1, 0, "∞"}, {3, 2, "1.50×"}} {
		if got := Ratio(c.a, c.b); got != c.want {
			t.Errorf("Ratio(%v, %v) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}
