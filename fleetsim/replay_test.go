package fleetsim

import "testing"

// Two runs whose timelines differ only in the order of one instant's
// entries, in log lines, in random identities or in the provider ids the
// scheduler's order of two creations handed out compare equal; a run that
// did something else at that instant does not.
func TestComparable(t *testing.T) {
	a := []Entry{
		{At: 1, Source: "provider", What: "create server a by agent-2, token 0x1: id-000004"},
		{At: 1, Source: "provider", What: "create server b by agent-2, token 0x1: id-000005"},
		{At: 2, Source: "agent-0", What: "log: took the lease"},
		{At: 2, Source: "apiserver", What: `lease ns/reaper holder "" -> "0123456789abcdef"`},
	}
	b := []Entry{
		{At: 1, Source: "provider", What: "create server b by agent-2, token 0x1: id-000004"},
		{At: 1, Source: "provider", What: "create server a by agent-2, token 0x1: id-000005"},
		{At: 2, Source: "apiserver", What: `lease ns/reaper holder "" -> "fedcba9876543210"`},
	}
	if d := diverge(comparable(a), comparable(b)); d != "" {
		t.Errorf("the runs parted: %s", d)
	}
	c := append([]Entry(nil), b...)
	c[1].What = "create server c by agent-2, token 0x1: id-000005"
	if diverge(comparable(a), comparable(c)) == "" {
		t.Error("a run that created another object compares equal")
	}
}
