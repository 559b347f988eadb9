package prommetrics_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestHookDependencies holds the split of the metrics hooks: each
// subpackage compiles the one package it hooks and no other package of
// reconkit (the backoff helper and internal packages aside), and the hooks
// of packages that need neither etcd nor the Kubernetes API compile
// neither.
func TestHookDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list; skipped under -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies with")
	}
	const mod = "github.com/reconkit/reconkit/"
	features := []string{"election", "versiongate", "nodestatus", "checkpoint", "lbrecon", "events", "prommetrics"}
	heavy := []string{"go.etcd.io/", "google.golang.org/grpc", "k8s.io/client-go/", "k8s.io/api/", "k8s.io/apimachinery/"}
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
		t.Run(strings.ReplaceAll(tc.pkg, "/", "_"), func(t *testing.T) {
			out, err := exec.Command(goTool, "list", "-deps", mod+tc.pkg).CombinedOutput()
			if err != nil {
				t.Fatalf("go list: %v\n%s", err, out)
			}
			deps := strings.Fields(string(out))
			if len(deps) == 0 {
				t.Fatalf("go list -deps %s listed nothing", tc.pkg)
			}
			var forbidden []string
			for _, f := range features {
				if f != tc.hooks {
					forbidden = append(forbidden, mod+f)
				}
			}
			if tc.light {
				forbidden = append(forbidden, heavy...)
			}
			for _, dep := range deps {
				if strings.HasPrefix(dep, mod+"prommetrics/") {
					continue // the hook itself and promreg
				}
				for _, f := range forbidden {
					if dep == f || strings.HasPrefix(dep, strings.TrimSuffix(f, "/")+"/") {
						t.Errorf("%s depends on %s", tc.pkg, dep)
					}
				}
			}
		})
	}
}
