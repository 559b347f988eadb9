package lbrecon_test

import "testing"

// The unit tests' budget (go test -short): a test that sweeps many seeds,
// crash points or provider setups runs a subset there, chosen so that
// each guarantee it holds still fails when broken, and the full suite
// runs the whole sweep.

// inShort returns short under go test -short, and full otherwise.
func inShort[T any](full, short T) T {
	if testing.Short() {
		return short
	}
	return full
}
