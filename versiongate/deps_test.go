package versiongate_test

import (
	"testing"

	"github.com/reconkit/reconkit/internal/depstest"
)

// TestStoreDependencies holds the split of the versiongate packages: a host
// that imports the gate, its protobuf messages or versiongatetest compiles
// neither etcd's client nor gRPC nor client-go, whichever store it uses;
// only the etcd store's own package compiles etcd's client, and it
// compiles no client-go. Protobuf (the encoded status and records) and
// k8s.io/utils (the clock) are allowed everywhere.
func TestStoreDependencies(t *testing.T) {
	etcdTree := []string{"go.etcd.io/", "google.golang.org/grpc"}
	kubeTree := []string{"k8s.io/client-go/", "k8s.io/api/", "k8s.io/apimachinery/", "k8s.io/kube-openapi/", "sigs.k8s.io/"}
	both := append(append([]string{}, etcdTree...), kubeTree...)
	depstest.Check(t,
		depstest.Rule{Package: "versiongate", Forbidden: both},
		depstest.Rule{Package: "versiongate/versionpb", Forbidden: both},
		depstest.Rule{Package: "versiongate/versiongatetest", Forbidden: both},
		depstest.Rule{Package: "versiongate/etcdstore", Forbidden: kubeTree},
	)
}
