package healthz_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies: the aggregator takes named funcs and imports none of
// the packages whose checks it serves, nor anything outside the standard
// library.
func TestDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list; skipped under -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies with")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/reconkit/reconkit/healthz").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) != 1 || deps[0] != "github.com/reconkit/reconkit/healthz" {
		t.Errorf("healthz depends on %v; want the standard library alone", deps)
	}
}
