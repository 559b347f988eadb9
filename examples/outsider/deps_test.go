package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The agent runs on the Kubernetes API alone: the program compiles no etcd
// client and no gRPC.
func TestNoEtcdNoGRPC(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies with")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps listed nothing")
	}
	for _, dep := range deps {
		for _, heavy := range []string{"go.etcd.io/", "google.golang.org/grpc"} {
			if strings.HasPrefix(dep, heavy) || dep+"/" == heavy {
				t.Errorf("the agent compiles %s", dep)
			}
		}
	}
	t.Logf("the agent compiles %d packages", len(deps))
}
