// Command etcd is the etcd server that reconkit's tests run as a separate
// process. It lives in its own module so that the server's dependencies never
// reach the reconkit module's requirements.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
