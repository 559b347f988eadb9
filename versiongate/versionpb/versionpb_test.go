package versionpb_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/reconkit/reconkit/versiongate/versionpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestGeneratedCodeUpToDate regenerates the Go code into a temporary
// directory with the same tool `go generate` runs and requires it to match
// the committed file byte for byte.
func TestGeneratedCodeUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generator with the go command (may download modules); skipped under -short")
	}
	out := t.TempDir()
	here, err := os.Getwd()
	require.NoError(t, err)
	cmd := exec.Command("go", "run", "-C", filepath.Join(here, "..", "..", "internal", "tools", "protogen"), ".",
		"-I", here, "-o", out, "versionpb.proto")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, "generator failed: %s", msg)

	want, err := os.ReadFile("versionpb.pb.go")
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(out, "versionpb.pb.go"))
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got),
		"versionpb.pb.go is stale: run `go generate ./versiongate/...` and commit the result")
}

func TestRoundTrip(t *testing.T) {
	in := &versionpb.Status{
		State: versionpb.Status_STATE_DONE,
		Version: &versionpb.Version{
			Release:    &versionpb.Release{Major: 1, Minor: 2, Patch: 3},
			PreRelease: "rc.1",
			Commit:     "abc123",
		},
		MinimumCompatibleRelease: &versionpb.Release{Major: 1, Minor: 1},
	}
	b, err := proto.Marshal(in)
	require.NoError(t, err)
	out := &versionpb.Status{}
	require.NoError(t, proto.Unmarshal(b, out))
	require.True(t, proto.Equal(in, out))
}
