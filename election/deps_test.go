package election_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBackendDependencies holds the split of the election packages: a host
// that imports the core package or electiontest compiles neither etcd's
// client nor client-go; a Lease-only host compiles no etcd and no gRPC;
// an etcd-only host compiles no client-go, API types or apimachinery.
// k8s.io/utils (the clock) is allowed everywhere.
func TestBackendDependencies(t *testing.T) {
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
	for _, tc := range []struct {
		pkg       string
		forbidden []string
	}{
		{"election", append(append([]string{}, etcdTree...), kubeTree...)},
		{"election/electiontest", append(append([]string{}, etcdTree...), kubeTree...)},
		{"internal/term", append(append([]string{}, etcdTree...), kubeTree...)},
		{"election/lease", etcdTree},
		{"election/etcd", kubeTree},
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
