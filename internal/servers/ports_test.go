package servers

import (
	"testing"
)

func TestFixedPortRange(t *testing.T) {
	for _, c := range []struct {
		elo, ehi, lo, hi int
	}{
		{32768, 60999, 10000, 32768},
		{0, 0, 0, 0},
		{1024, 60000, 60001, 65536},
		{1024, 65535, 0, 0},
		{10500, 65000, 0, 0},
	} {
		lo, hi := fixedPortRange(c.elo, c.ehi)
		if lo != c.lo || hi != c.hi {
			t.Errorf("fixedPortRange(%d, %d) = [%d, %d), want [%d, %d)", c.elo, c.ehi, lo, hi, c.lo, c.hi)
		}
	}
}

// TestFreePortsAvoidTheEphemeralRange holds the reason a restarted server
// finds its port free: no outgoing connection can have been given it.
func TestFreePortsAvoidTheEphemeralRange(t *testing.T) {
	elo, ehi := readEphemeralRange()
	if elo == 0 {
		t.Skip("no ephemeral port range to read on this system")
	}
	ports, err := freePorts(8)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Errorf("port %d returned twice in %v", p, ports)
		}
		seen[p] = true
		if lo, hi := fixedPortRange(elo, ehi); hi > lo && (p >= elo && p <= ehi) {
			t.Errorf("port %d is in the ephemeral range [%d, %d]", p, elo, ehi)
		}
	}
}
