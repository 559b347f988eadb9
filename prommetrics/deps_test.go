package prommetrics_test

import (
	"testing"

	"github.com/reconkit/reconkit/internal/depstest"
)

// TestHookDependencies holds the split of the metrics hooks: each
// subpackage compiles the one package it hooks and no other package of
// reconkit (the backoff helper and internal packages aside), and the hooks
// of packages that need neither etcd nor the Kubernetes API compile
// neither.
func TestHookDependencies(t *testing.T) {
	features := []string{"election", "versiongate", "nodestatus", "checkpoint", "lbrecon", "events", "prommetrics"}
	heavy := []string{"go.etcd.io/", "google.golang.org/grpc", "k8s.io/client-go/", "k8s.io/api/", "k8s.io/apimachinery/"}
	var rules []depstest.Rule
	for _, tc := range []struct {
		pkg, hooks string
		light      bool // neither etcd nor the Kubernetes API
	}{
		{"prommetrics/promelection", "election", true},
		{"prommetrics/promcheckpoint", "checkpoint", true},
		{"prommetrics/promlbrecon", "lbrecon", true},
		{"prommetrics/promnodestatus", "nodestatus", false},
		{"prommetrics/promversiongate", "versiongate", false},
		{"prommetrics/internal/promreg", "", true},
	} {
		var forbidden []string
		for _, f := range features {
			if f != tc.hooks {
				forbidden = append(forbidden, depstest.Module+"/"+f)
			}
		}
		if tc.light {
			forbidden = append(forbidden, heavy...)
		}
		// The hook itself and promreg live under prommetrics/.
		rules = append(rules, depstest.Rule{Package: tc.pkg, Forbidden: forbidden, Allowed: []string{depstest.Module + "/prommetrics/"}})
	}
	depstest.Check(t, rules...)
}
