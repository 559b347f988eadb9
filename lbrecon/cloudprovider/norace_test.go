//go:build !race

package cloudprovider_test

// raceDetector is true when the tests run with -race.
const raceDetector = false
