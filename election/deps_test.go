package election_test

import (
	"testing"

	"github.com/reconkit/reconkit/internal/depstest"
)

// TestBackendDependencies holds the split of the election packages: a host
// that imports the core package or electiontest compiles neither etcd's
// client nor client-go; a Lease-only host compiles no etcd and no gRPC;
// an etcd-only host compiles no client-go, API types or apimachinery.
// k8s.io/utils (the clock) is allowed everywhere.
func TestBackendDependencies(t *testing.T) {
	etcdTree := []string{"go.etcd.io/", "google.golang.org/grpc"}
	kubeTree := []string{"k8s.io/client-go/", "k8s.io/api/", "k8s.io/apimachinery/", "k8s.io/kube-openapi/", "sigs.k8s.io/"}
	both := append(append([]string{}, etcdTree...), kubeTree...)
	depstest.Check(t,
		depstest.Rule{Package: "election", Forbidden: both},
		depstest.Rule{Package: "election/electiontest", Forbidden: both},
		depstest.Rule{Package: "internal/term", Forbidden: both},
		depstest.Rule{Package: "election/lease", Forbidden: etcdTree},
		depstest.Rule{Package: "election/etcd", Forbidden: kubeTree},
	)
}
