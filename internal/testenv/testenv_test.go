package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/reconkit/reconkit/internal/servers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// eventually retries f every 50ms until it succeeds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, f func(ctx context.Context) error) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		last := f(ctx)
		cancel()
		if last == nil {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("%s: not within %s: %v", what, within, last)
		case <-tick.C:
		}
	}
}

func TestPutSurvivesMemberRestart(t *testing.T) {
	e := Etcd(t)
	cli := e.Client(t)
	ctx := context.Background()
	_, err := cli.Put(ctx, "/k", "v1")
	require.NoError(t, err)

	m := e.Members[0]
	m.Kill()
	require.False(t, m.Running())
	require.NoError(t, m.Restart(ctx))
	require.True(t, m.Running())

	eventually(t, 30*time.Second, "read after restart", func(ctx context.Context) error {
		resp, err := cli.Get(ctx, "/k")
		if err != nil {
			return err
		}
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v1" {
			return errors.New("value lost across the restart")
		}
		return nil
	})
}

func TestClusterClientsFailOverFromKilledMember(t *testing.T) {
	e := Etcd(t, Members(3))
	require.Len(t, e.Members, 3)
	// A client that knows every member, but is pinned first to member 0.
	cli := NewEtcdClient(t, e.Members[0].ClientURL(), e.Members[1].ClientURL(), e.Members[2].ClientURL())
	ctx := context.Background()
	_, err := cli.Put(ctx, "/before", "x")
	require.NoError(t, err)

	e.Members[0].Kill()
	eventually(t, 30*time.Second, "write after a member died", func(ctx context.Context) error {
		_, err := cli.Put(ctx, "/after", "y")
		return err
	})
	resp, err := cli.Get(ctx, "/before")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)

	// The killed member rejoins with its data and catches up.
	require.NoError(t, e.Members[0].Restart(ctx))
	only := NewEtcdClient(t, e.Members[0].ClientURL())
	eventually(t, 30*time.Second, "restarted member catches up", func(ctx context.Context) error {
		resp, err := only.Get(ctx, "/after") // linearizable: goes through the leader
		if err != nil {
			return err
		}
		if len(resp.Kvs) != 1 {
			return errors.New("write made while it was down is missing")
		}
		return nil
	})
}

func TestPausedMemberStopsAnsweringAndResumes(t *testing.T) {
	e := Etcd(t, Members(3))
	m := e.Members[2]
	only := NewEtcdClient(t, m.ClientURL())
	ctx := context.Background()
	_, err := only.Put(ctx, "/a", "1")
	require.NoError(t, err)

	require.NoError(t, m.Pause())
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = only.Get(short, "/a")
	cancel()
	require.Error(t, err, "a paused member must not answer")
	require.True(t, m.Running(), "a paused member is still a live process")

	// The other two keep a quorum. If the paused member was the raft
	// leader, writes fail until they have elected a new one.
	rest := NewEtcdClient(t, e.Members[0].ClientURL(), e.Members[1].ClientURL())
	eventually(t, 30*time.Second, "the other two accept writes", func(ctx context.Context) error {
		_, err := rest.Put(ctx, "/b", "2")
		return err
	})

	require.NoError(t, m.Resume())
	eventually(t, 30*time.Second, "resumed member answers", func(ctx context.Context) error {
		resp, err := only.Get(ctx, "/b")
		if err == nil && len(resp.Kvs) != 1 {
			return errors.New("resumed member did not catch up")
		}
		return err
	})
}

func TestProxyCutTimesOutAndRestoreHeals(t *testing.T) {
	e := Etcd(t)
	p := Proxy(t, e.Members[0].ClientAddr())
	cli := NewEtcdClient(t, p.Addr())
	ctx := context.Background()
	_, err := cli.Put(ctx, "/k", "1")
	require.NoError(t, err)

	p.Cut()
	short, cancel := context.WithTimeout(ctx, time.Second)
	_, err = cli.Put(short, "/k", "2")
	cancel()
	require.Error(t, err)
	require.True(t, errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "DeadlineExceeded"),
		"a cut must look like a partition (a timeout), got %v", err)

	p.Restore()
	// The Put held during the cut may still land after the restore, as a
	// request does when a real partition heals; only the new key is certain.
	eventually(t, 30*time.Second, "requests heal after restore", func(ctx context.Context) error {
		_, err := cli.Put(ctx, "/healed", "3")
		return err
	})
	resp, err := e.Client(t).Get(ctx, "/healed")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.Equal(t, "3", string(resp.Kvs[0].Value))
}

func TestProxyDelay(t *testing.T) {
	e := Etcd(t)
	p := Proxy(t, e.Members[0].ClientAddr())
	cli := NewEtcdClient(t, p.Addr())
	ctx := context.Background()
	_, err := cli.Get(ctx, "/warm") // connect before measuring
	require.NoError(t, err)

	const delay = 150 * time.Millisecond
	p.SetDelay(delay)
	start := time.Now()
	_, err = cli.Get(ctx, "/k")
	require.NoError(t, err)
	// Request and response each wait at least once.
	require.GreaterOrEqual(t, time.Since(start), 2*delay)

	p.SetDelay(0)
	_, err = cli.Get(ctx, "/k")
	require.NoError(t, err)
}

func TestProxyDropConnections(t *testing.T) {
	e := Etcd(t)
	p := Proxy(t, e.Members[0].ClientAddr())
	cli := NewEtcdClient(t, p.Addr())
	ctx := context.Background()
	_, err := cli.Put(ctx, "/k", "1")
	require.NoError(t, err)
	p.DropConnections()
	eventually(t, 30*time.Second, "client reconnects after a reset", func(ctx context.Context) error {
		_, err := cli.Put(ctx, "/k", "2")
		return err
	})
}

func TestAPIServerNodeStatusAndRestart(t *testing.T) {
	a := APIServer(t)
	cs, err := kubernetes.NewForConfig(a.Config())
	require.NoError(t, err)
	ctx := context.Background()

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	_, err = cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	require.NoError(t, err)

	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"conditions": []map[string]any{{"type": "Ready", "status": "True", "reason": "Testing"}},
	}})
	require.NoError(t, err)
	_, err = cs.CoreV1().Nodes().Patch(ctx, "n1", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	require.NoError(t, err)

	got, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, got.Status.Conditions, 1)
	require.Equal(t, corev1.NodeReady, got.Status.Conditions[0].Type)

	require.NoError(t, a.Restart(ctx))
	got, err = cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	require.NoError(t, err, "the node must survive an apiserver restart")
	require.Equal(t, "Testing", got.Status.Conditions[0].Reason)
}

func TestServerThatCannotStartFailsWithLogs(t *testing.T) {
	bins := Binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A data directory that is a regular file: etcd starts, then fails.
	notADir := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(notADir, []byte("x"), 0o600))
	_, err := servers.StartEtcd(ctx, servers.EtcdOptions{Binary: bins.Etcd, ExtraArgs: []string{"--data-dir", notADir}})
	require.Error(t, err)
	require.Contains(t, err.Error(), "exited before it was ready")
	require.Contains(t, err.Error(), notADir, "the error must carry the server's last log lines")
}

func TestServerThatNeverGetsReadyTimesOut(t *testing.T) {
	bins := Binaries(t)
	// Two members configured, only one started: the cluster can never be
	// healthy, so the start must time out with a clear error, not hang.
	ctx := context.Background()
	_, err := servers.StartEtcd(ctx, servers.EtcdOptions{
		Binary:       bins.Etcd,
		StartTimeout: 2 * time.Second,
		ExtraArgs:    []string{"--initial-cluster", "m0=http://127.0.0.1:1,ghost=http://127.0.0.1:2", "--initial-advertise-peer-urls", "http://127.0.0.1:1", "--listen-peer-urls", "http://127.0.0.1:0"},
	})
	require.Error(t, err)
	require.Contains(t, err.Error(), "etcd member m0")
}

func TestBuildFailureIsClear(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go toolchain; skipped under -short")
	}
	tools := t.TempDir()
	for _, name := range []string{"etcd", "kube"} {
		dir := filepath.Join(tools, name)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module broken\n\ngo 1.22\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() { undefinedCall() }\n"), 0o644))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := servers.Build(ctx, servers.BuildOptions{ToolsDir: tools, CacheDir: t.TempDir(), SkipAPIServer: true})
	require.Error(t, err)
	require.Contains(t, err.Error(), "building etcd")
	require.Contains(t, err.Error(), "undefinedCall", "the error must carry the compiler's output")
}
