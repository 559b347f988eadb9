package versiongate_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestStoreDependencies holds the split of the versiongate packages: a host
// that imports the gate, its protobuf messages or versiongatetest compiles
// neither etcd's client nor gRPC nor client-go, whichever store it uses;
// only the etcd store's own package compiles etcd's client, and it
// compiles no client-go. Protobuf (the encoded status and records) and
// k8s.io/utils (the clock) are allowed everywhere.
func TestStoreDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list; skipped under -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies with")
	}
	const mod = "github.com/reconkit/reconkit/"
	etcdTree := []string{"go.etcd.io/", "google.golang.org/grpc"}
	kubeTree := []string{"k8s.io/client-go/", "k8s.io/api/", "k8s.io/apimachinery/", "k8s.io/kube-openapi/", "sigs.k8s.io/"}
	both := append(append([]string{}, etcdTree...), kubeTree...)
	for _, tc := range []struct {
		pkg       string
		forbidden []string
	}{
		{"versiongate", both},
		{"versiongate/versionpb", both},
		{"versiongate/versiongatetest", both},
		{"versiongate/etcdstore", kubeTree},
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
			for _, dep := range deps {
				for _, f := range tc.forbidden {
					if strings.HasPrefix(dep, f) || dep+"/" == f {
						t.Errorf("%s depends on %s", tc.pkg, dep)
					}
				}
			}
		})
	}
}
