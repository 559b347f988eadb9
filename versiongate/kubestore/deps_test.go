package kubestore_test

import (
	"os/exec"
	"strings"
	"testing"
)

// A Kubernetes-only host compiles no etcd and no gRPC: the store's
// dependencies hold neither.
func TestNoEtcdDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list; skipped under -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies with")
	}
	const pkg = "github.com/reconkit/reconkit/versiongate/kubestore"
	out, err := exec.Command(goTool, "list", "-deps", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps listed nothing")
	}
	for _, dep := range deps {
		for _, f := range []string{"go.etcd.io/", "google.golang.org/grpc", "github.com/reconkit/reconkit/versiongate/etcdstore"} {
			if strings.HasPrefix(dep, f) || dep == strings.TrimSuffix(f, "/") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}
