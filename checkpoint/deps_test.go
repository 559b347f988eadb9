package checkpoint_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoKubernetesDependencies: the store and the controller compile
// without client-go, k8s.io/api and k8s.io/apimachinery (the package doc
// promises it); only the clock interface of k8s.io/utils is used.
func TestNoKubernetesDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list; skipped under -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies with")
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/reconkit/reconkit/checkpoint").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "k8s.io/") && pkg != "k8s.io/utils/clock" {
			t.Errorf("checkpoint depends on %s", pkg)
		}
	}
}
