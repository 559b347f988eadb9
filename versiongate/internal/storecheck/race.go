//go:build race

package storecheck

// raceEnabled: this binary runs with the race detector, which slows the
// checker's search several times over (see verifyInChild).
const raceEnabled = true
