package etcd

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	setParallel()
	goleak.VerifyTestMain(m)
}

// setParallel lets up to 4 tests marked parallel run at once, unless
// -parallel is given: each has an etcd of its own and waits on TTLs, not
// on the CPU, so the default (GOMAXPROCS, 2 on a CI runner) left the
// package's time the sum of their waits.
func setParallel() {
	if f := flag.Lookup("test.parallel"); f != nil {
		_ = f.Value.Set("4")
	}
}
