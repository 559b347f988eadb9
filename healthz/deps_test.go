package healthz_test

import (
	"testing"

	"github.com/reconkit/reconkit/internal/depstest"
)

// TestDependencies: the aggregator takes named funcs and imports none of
// the packages whose checks it serves, nor anything outside the standard
// library.
func TestDependencies(t *testing.T) {
	depstest.Check(t, depstest.Rule{Package: "healthz", StandardOnly: true})
}
