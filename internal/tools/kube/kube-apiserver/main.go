// Command kube-apiserver is the Kubernetes API server that reconkit's tests run
// as a separate process. It lives in its own module so that k8s.io/kubernetes
// never reaches the reconkit module's requirements.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
