// Package jitter draws the random fraction of every jittered pause of
// reconkit's loops from one source the caller chooses.
//
// Each package that jitters a loop takes a Rand func() float64 in its
// Config or options: it draws uniformly in [0, 1), and nil means
// math/rand/v2's Float64, whose global source cannot be seeded. A caller
// that wants reproducible pauses (a test, a simulator that replays a seed)
// sets it. The helpers here apply that rule once: they call the given
// source, or the global one when it is nil, clamp what it returns into
// [0, 1), and shape the pause from it. They keep no state of their own.
package jitter
