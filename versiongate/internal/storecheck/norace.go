//go:build !race

package storecheck

const raceEnabled = false
