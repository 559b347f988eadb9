package jitter

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func fixed(u float64) func() float64 { return func() float64 { return u } }

// The given source is what every shape draws from, and a nil one falls back
// to the global source within the same bounds.
func TestShapesDrawFromTheGivenSource(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"Up", Up(fixed(0.5), time.Second, 0.2), 1100 * time.Millisecond},
		{"Up zero factor counts as 1", Up(fixed(0.5), time.Second, 0), 1500 * time.Millisecond},
		{"Spread", Spread(fixed(0.75), time.Second, 0.2), 1100 * time.Millisecond},
		{"Spread without factor", Spread(fixed(0.75), time.Second, 0), time.Second},
		{"Int64N", time.Duration(Int64N(fixed(0.5), 11)), 5},
		{"Int64N at the top", time.Duration(Int64N(fixed(math.Nextafter(1, 0)), 3)), 2},
		{"Int64N of nothing", time.Duration(Int64N(fixed(0.5), 0)), 0},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestFloat64ClampsAFaultySource(t *testing.T) {
	for _, u := range []float64{-1, math.NaN(), 1, 2, math.Inf(1)} {
		if got := Float64(fixed(u)); !(got >= 0 && got < 1) {
			t.Errorf("Float64 of a source answering %v = %v, want within [0, 1)", u, got)
		}
	}
	for range 100 {
		if got := Float64(nil); !(got >= 0 && got < 1) {
			t.Fatalf("Float64(nil) = %v, want within [0, 1)", got)
		}
	}
}

// Split gives each loop a source of its own: the same sources from the
// same parent, in the order they were split, whatever order the loops then
// draw in; nil from nil.
func TestSplitGivesEachLoopItsOwnSource(t *testing.T) {
	parent := func(seed uint64) func() float64 { return rand.New(rand.NewPCG(seed, 0)).Float64 }
	p := parent(1)
	a, b := Split(p), Split(p)
	q := parent(1)
	a2, b2 := Split(q), Split(q)
	// Drawn in opposite orders: each loop's draws are its own.
	var gotA, gotB, wantA, wantB []float64
	for range 4 {
		gotA = append(gotA, a())
		gotB = append(gotB, b())
	}
	for range 4 {
		wantB = append(wantB, b2())
	}
	for range 4 {
		wantA = append(wantA, a2())
	}
	if !slices.Equal(gotA, wantA) || !slices.Equal(gotB, wantB) {
		t.Errorf("split sources depend on the order of draws: %v %v, then %v %v", gotA, gotB, wantA, wantB)
	}
	if slices.Equal(gotA, gotB) {
		t.Errorf("two loops share draws: %v", gotA)
	}
	if Split(nil) != nil {
		t.Error("Split(nil) is not nil")
	}
}
