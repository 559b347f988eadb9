package kubestore_test

import (
	"testing"

	"github.com/reconkit/reconkit/internal/depstest"
)

// A Kubernetes-only host compiles no etcd and no gRPC: the store's
// dependencies hold neither.
func TestNoEtcdDependencies(t *testing.T) {
	depstest.Check(t, depstest.Rule{
		Package:   "versiongate/kubestore",
		Forbidden: []string{"go.etcd.io/", "google.golang.org/grpc", depstest.Module + "/versiongate/etcdstore"},
	})
}
