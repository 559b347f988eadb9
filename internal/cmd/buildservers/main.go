package main

import (
	"context"
	"fmt"
	"os"

	"github.com/reconkit/reconkit/internal/servers"
)

func main() {
	// No time limit: a cold build took from 4 to 26 minutes on the same kind
	// of machine, depending on its load; CI's own limit stops one that hangs.
	ctx := context.Background()
	// The two Kubernetes servers come from one go build, which compiles
	// what they share once.
	opts := servers.BuildOptions{ControllerManager: true, Logf: func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}}
	bins, err := servers.Build(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("etcd:                    %s\nkube-apiserver:          %s\nkube-controller-manager: %s\n", bins.Etcd, bins.KubeAPIServer, bins.KubeControllerManager)
}
