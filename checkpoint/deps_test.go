package checkpoint_test

import (
	"testing"

	"github.com/reconkit/reconkit/internal/depstest"
)

// TestNoKubernetesDependencies: the store and the controller compile
// without client-go, k8s.io/api and k8s.io/apimachinery (the package doc
// promises it); only the clock interface of k8s.io/utils is used.
func TestNoKubernetesDependencies(t *testing.T) {
	depstest.Check(t, depstest.Rule{Package: "checkpoint", Forbidden: []string{"k8s.io/"}, Allowed: []string{"k8s.io/utils/clock"}})
}
