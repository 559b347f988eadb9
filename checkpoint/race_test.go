//go:build race

package checkpoint_test

const raceEnabled = true
