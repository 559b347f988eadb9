package testenv_test

import (
	"fmt"

	"github.com/reconkit/reconkit/internal/servers"
	"github.com/reconkit/reconkit/internal/testenv"
)

// Options shape the etcd cluster a test gets from Etcd; applied to the
// servers' options, they show what the test will run.
func ExampleMembers() {
	var o servers.EtcdOptions
	for _, opt := range []testenv.EtcdOption{
		testenv.Members(3),
		testenv.EtcdArgs("--quota-backend-bytes=1048576"),
	} {
		opt(&o)
	}
	fmt.Println(o.Members, o.ExtraArgs)
	// Output: 3 [--quota-backend-bytes=1048576]
}
