package depstest

import (
	"slices"
	"testing"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, dep string
		want         bool
	}{
		{"google.golang.org/grpc", "google.golang.org/grpc", true},
		{"google.golang.org/grpc", "google.golang.org/grpc/codes", true},
		{"google.golang.org/grpc", "google.golang.org/grpcx", false},
		{"k8s.io/client-go/", "k8s.io/client-go/kubernetes", true},
		{"k8s.io/client-go/", "k8s.io/client-go", false},
		{"k8s.io/", "k8s.io/utils/clock", true},
		{Module + "/prommetrics/", Module + "/prommetrics", false},
		{Module + "/prommetrics", Module + "/prommetrics", true},
	} {
		if got := Match(tc.pattern, tc.dep); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.dep, got, tc.want)
		}
	}
}

func TestViolations(t *testing.T) {
	deps := []string{"context", "k8s.io/utils/clock", "k8s.io/api/core/v1", "go.etcd.io/etcd/client/v3"}
	r := Rule{Forbidden: []string{"k8s.io/", "google.golang.org/grpc"}, Allowed: []string{"k8s.io/utils/clock"}}
	if got, want := violations(deps, r), []string{"k8s.io/api/core/v1"}; !slices.Equal(got, want) {
		t.Errorf("violations = %q, want %q", got, want)
	}
	if got := violations(deps, Rule{}); got != nil {
		t.Errorf("no forbidden patterns: violations = %q", got)
	}
	got := violations(deps, Rule{StandardOnly: true, Allowed: []string{"k8s.io/"}})
	if want := []string{"go.etcd.io/etcd/client/v3"}; !slices.Equal(got, want) {
		t.Errorf("standard library only: violations = %q, want %q", got, want)
	}
}

// TestCheck lists this package's own dependencies: the standard library
// alone.
func TestCheck(t *testing.T) {
	Check(t, Rule{Package: "internal/depstest", StandardOnly: true})
}
