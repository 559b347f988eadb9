package lbrecon

import (
	"net/netip"
	"slices"
	"strings"
)

// boundTo returns the address and port a bind holds, on a provider that
// refuses two binds on one address and port.
func boundTo(o Object) (netip.AddrPort, bool) {
	s, ok := o.Spec.(BindSpec)
	return netip.AddrPortFrom(s.Address, s.Port), ok
}

// breakBinds moves to ch.Break the observed binds that hold an address and
// port a created or updated bind needs and would never give it up in
// time: binds destroyed anyway, which make-before-break would keep until
// the binds they block are in service, and, in each cycle of binds taking
// each other's addresses and ports (two ports swapping external ports),
// the bind of the greatest name. A bind that moves to a free address and
// port is left to its update: the binds waiting for what it holds get it
// on a later pass.
func breakBinds(ch Changes, observed []Object) Changes {
	holder := make(map[netip.AddrPort]Object, len(observed))
	for _, o := range observed {
		if l, ok := boundTo(o); ok {
			holder[l] = o
		}
	}
	needed := make(map[netip.AddrPort]bool, len(ch.Create)+len(ch.Update))
	moves := make(map[Key]netip.AddrPort, len(ch.Update)) // observed bind -> address and port it moves to
	for _, c := range ch.Create {
		if l, ok := boundTo(c); ok {
			needed[l] = true
		}
	}
	for _, u := range ch.Update {
		if l, ok := boundTo(u.Desired); ok {
			needed[l] = true
			moves[u.Current.Key()] = l
		}
	}
	breaks := make(map[Key]bool)
	for _, d := range ch.Destroy {
		if l, ok := boundTo(d); ok && needed[l] {
			breaks[d.Key()] = true
		}
	}
	for _, u := range ch.Update {
		start := u.Current.Key()
		cycle := []Object{u.Current}
		for cur := start; ; {
			h, ok := holder[moves[cur]]
			if _, moving := moves[h.Key()]; !ok || !moving || h.Key() == cur {
				break // what it needs is free, or its holder stays or goes anyway
			}
			if h.Key() == start {
				last := slices.MaxFunc(cycle, func(a, b Object) int { return strings.Compare(a.Name, b.Name) })
				breaks[last.Key()] = true
				break
			}
			if slices.ContainsFunc(cycle, func(o Object) bool { return o.Key() == h.Key() }) || len(cycle) > len(moves) {
				break // a cycle that start only leads into: its members find it
			}
			cycle = append(cycle, h)
			cur = h.Key()
		}
	}
	if len(breaks) == 0 {
		return ch
	}
	keep := func(o Object) bool {
		if breaks[o.Key()] {
			ch.Break = append(ch.Break, o)
			return false
		}
		return true
	}
	ch.Destroy = slices.DeleteFunc(ch.Destroy, func(o Object) bool { return !keep(o) })
	ch.Update = slices.DeleteFunc(ch.Update, func(u Change) bool { return !keep(u.Current) })
	return ch
}
