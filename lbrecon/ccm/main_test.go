package ccm_test

import (
	"testing"

	"github.com/reconkit/reconkit/lbrecon/ccm/ccmtest"
)

// The tests run k8s.io/cloud-provider's service controller with ccmtest,
// whose controller process is this test binary started again.
func TestMain(m *testing.M) { ccmtest.Main(m) }
