// Command kube-controller-manager is the Kubernetes controller manager that
// reconkit's tests run as a separate process, usually with only the node
// lifecycle controller enabled. It lives in its own module so that
// k8s.io/kubernetes never reaches the reconkit module's requirements.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
