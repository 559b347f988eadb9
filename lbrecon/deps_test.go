package lbrecon_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies holds lbrecon's split: the core package and lbrecontest
// compile neither k8s.io/cloud-provider nor client-go (only lbrecon/ccm
// does); k8s.io/utils (the clock) is allowed.
func TestDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list; skipped under -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies with")
	}
	forbidden := []string{"k8s.io/cloud-provider", "k8s.io/component-base/", "k8s.io/client-go/", "k8s.io/api/", "k8s.io/apimachinery/"}
	for _, pkg := range []string{"lbrecon", "lbrecon/lbrecontest"} {
		t.Run(strings.ReplaceAll(pkg, "/", "_"), func(t *testing.T) {
			out, err := exec.Command(goTool, "list", "-deps", "github.com/reconkit/reconkit/"+pkg).CombinedOutput()
			if err != nil {
				t.Fatalf("go list: %v\n%s", err, out)
			}
			deps := strings.Fields(string(out))
			if len(deps) == 0 {
				t.Fatalf("go list -deps %s listed nothing", pkg)
			}
			for _, dep := range deps {
				for _, f := range forbidden {
					if strings.HasPrefix(dep, f) || dep+"/" == f {
						t.Errorf("%s depends on %s", pkg, dep)
					}
				}
			}
		})
	}
}
