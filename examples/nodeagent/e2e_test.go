package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/reconkit/reconkit/internal/testenv"
)

// runMainEnv makes the test binary run the program's main instead of the
// tests: the end-to-end tests run the program as this binary re-executed,
// with the race detector when the tests have it, so that a data race in
// the program fails its run, and without linking a second binary.
const runMainEnv = "NODEAGENT_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// programBinary is the program to run: this test binary, which runs main
// when runMainEnv is set (start sets it).
func programBinary(t *testing.T) string {
	t.Helper()
	bin, err := os.Executable()
	require.NoError(t, err)
	return bin
}

// result is one finished run of the binary.
type result struct {
	stdout, stderr string
	err            error
}

// start runs the binary with args; lines of its stdout go to lines as they
// come. The run is killed at the deadline.
func start(t *testing.T, ctx context.Context, bin string, args ...string) (*exec.Cmd, <-chan string, <-chan result) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "GORACE=halt_on_error=1", runMainEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := make(chan string, 1024)
	done := make(chan result, 1)
	go func() {
		var stdout strings.Builder
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			stdout.WriteString(sc.Text() + "\n")
			select {
			case lines <- sc.Text():
			default:
			}
		}
		_, _ = io.Copy(io.Discard, out)
		err := cmd.Wait()
		close(lines)
		done <- result{stdout: stdout.String(), stderr: stderr.String(), err: err}
	}()
	return cmd, lines, done
}

var (
	dataDirRE  = regexp.MustCompile(`local etcd at \S+ \(data dir (\S+)\)`)
	kubeDirRE  = regexp.MustCompile(`local kube-apiserver at \S+ \(state dir (\S+)\)`)
	stateDirRE = regexp.MustCompile(`checkpoints in (\S+)`)
)

// checkNothingLeft checks that the run stopped the agents' etcd when it
// had one (agentEtcd) and none otherwise, and, with a local
// kube-apiserver, the apiserver and its etcd (no process runs with their
// directories), and removed their directories and the state directory.
func checkNothingLeft(t *testing.T, stdout string, localKube, agentEtcd bool) {
	t.Helper()
	dirs := map[string]string{}
	m := dataDirRE.FindStringSubmatch(stdout)
	if agentEtcd {
		require.NotNil(t, m, "no etcd data dir in the output")
		dirs["etcd"] = filepath.Dir(m[1])
	} else {
		require.Nil(t, m, "an etcd was started for the agents")
		require.Contains(t, stdout, "no etcd for the agents")
	}
	m = kubeDirRE.FindStringSubmatch(stdout)
	if localKube {
		require.NotNil(t, m, "no kube-apiserver state dir in the output")
		dirs["kube-apiserver"] = m[1]
	} else {
		require.Nil(t, m, "a kube-apiserver was started")
	}
	for what, dir := range dirs {
		require.NoDirExists(t, dir, "%s's directory is left behind", what)
		if runtime.GOOS == "linux" {
			require.Empty(t, processesMentioning(t, dir), "a process of %s is left running", what)
		}
	}
	m = stateDirRE.FindStringSubmatch(stdout)
	require.NotNil(t, m, "no state dir in the output")
	require.NoDirExists(t, m[1], "the state directory is left behind")
}

// processesMentioning lists the PIDs whose command line contains s.
func processesMentioning(t *testing.T, s string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Contains(cmdline, []byte(s)) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the end-to-end runs of the example under -short: they build it and run a real etcd and kube-apiserver")
	}
}

// TestNodeAgent runs the example program (see runMainEnv) through every
// scenario on the Kubernetes store (the default: a Lease election and
// versiongate/kubestore, no etcd for the agents) and the failover and fence
// scenarios on the etcd store, all on a local kube-apiserver, then an
// interrupted run and an operated one, as a person would. No run uses the in-memory API
// (--kube memory, which needs --store etcd): its wiring is that of the
// etcd runs here, on a fake, and a real apiserver is what these runs are
// for.
//
// Each run starts servers of its own and spends most of its time waiting on
// leases and timers, so the runs are parallel subtests (as many at once as
// -parallel allows).
func TestNodeAgent(t *testing.T) {
	skipShort(t)
	bin := programBinary(t)
	for _, tc := range []struct {
		scenario string
		store    string
		verdict  *regexp.Regexp
	}{
		{"failover", storeKube, failoverRE},
		{"upgrade", storeKube, upgradeRE},
		{"bad-config", storeKube, badConfigRE},
		{"fence", storeKube, fenceRE},
		{"failover", storeEtcd, failoverRE},
		{"fence", storeEtcd, fenceRE},
	} {
		t.Run(tc.scenario+"/"+tc.store, func(t *testing.T) {
			t.Parallel()
			// The deadlines only bound a run that went wrong: a starved
			// machine takes several times as long as an idle one. The
			// context kills the program, which ends the run.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			began := time.Now()
			_, _, done := start(t, ctx, bin, "--scenario", tc.scenario, "--store", tc.store, "--pause", "200ms", "--deadline", "8m")
			r := recv(t, done, 11*time.Minute, "end of the run")
			t.Logf("%s finished in %v", tc.scenario, time.Since(began).Round(100*time.Millisecond))
			require.NoError(t, r.err, "exit status\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			var verdicts []string
			for _, l := range strings.Split(r.stdout, "\n") {
				if strings.HasPrefix(l, "VERDICT") {
					verdicts = append(verdicts, l)
				}
			}
			require.Len(t, verdicts, 1, "stdout:\n%s", r.stdout)
			m := tc.verdict.FindStringSubmatch(verdicts[0])
			require.NotNil(t, m, "verdict %q does not match %s", verdicts[0], tc.verdict)
			if tc.scenario == "failover" {
				killed, successor := m[1], m[2]
				require.NotEqual(t, killed, successor)
				require.NotContains(t, strings.Split(m[6], ","), killed, "the killed agent is still a target")
				require.Len(t, strings.Split(m[6], ","), 2)
			}
			if tc.scenario == "fence" {
				deposed, old, successor, next := m[1], m[2], m[3], m[4]
				require.NotEqual(t, deposed, successor)
				require.Less(t, mustAtoi(t, old), mustAtoi(t, next))
			}
			checkNothingLeft(t, r.stdout, true, tc.store == storeEtcd)
		})
	}
	t.Run("interrupt", func(t *testing.T) {
		t.Parallel()
		testInterrupt(t, bin)
	})
	t.Run("operate", func(t *testing.T) {
		t.Parallel()
		testOperate(t, bin)
	})
}

var httpAddrRE = regexp.MustCompile(`serving /metrics and /healthz on (http://\S+)`)

// testOperate runs the program on an apiserver of the test's own, as an
// operator points it at a cluster, with --http on a free port. Once the
// cluster is steady it scrapes /metrics (one agent leads; the gate's phase
// and the node controller's requests are there), asks /healthz, and finds
// the agents' events on their Nodes in the API; then it stops the program.
func testOperate(t *testing.T, bin string) {
	api := testenv.APIServer(t)
	cfg := api.Config()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, InsecureSkipTLSVerify: true}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	kc.CurrentContext = "test"
	require.NoError(t, clientcmd.WriteToFile(*kc, kubeconfig))
	hc, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	defer hc.CloseIdleConnections()
	kube, err := kubernetes.NewForConfigAndClient(cfg, hc)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd, lines, done := start(t, ctx, bin, "--kubeconfig", kubeconfig, "--http", "127.0.0.1:0")
	stopped := false
	defer func() {
		if !stopped {
			_ = cmd.Process.Kill()
			recv(t, done, time.Minute, "end of the killed program")
		}
	}()
	var base string
	steady := false
	for l := range lines {
		if m := httpAddrRE.FindStringSubmatch(l); m != nil {
			base = m[1]
		}
		if strings.Contains(l, "status=done@1.0.0") && strings.Count(l, " ready ") == 3 {
			steady = true
			break
		}
	}
	require.NotEmpty(t, base, "the program did not print the address it serves on")
	require.True(t, steady, "the cluster never became steady")

	web := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	// getBody answers a GET's status and body; a failed request is a
	// status of 0 with the error as the body.
	getBody := func(path string) (int, string) {
		resp, err := web.Get(base + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, err.Error()
		}
		return resp.StatusCode, string(b)
	}
	// Steady at the line above is no promise for the next instant: on a
	// starved machine a leader can miss its renewal and another take
	// over in between. So the checks below are asked again until they
	// hold together, within a deadline.
	leaderRE := regexp.MustCompile(`(?m)^leader_election_master_status\{name="(agent-\d)"\} 1$`)
	var leader string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, metrics := getBody("/metrics")
		if !assert.Equal(c, http.StatusOK, code, metrics) {
			return
		}
		leaders := leaderRE.FindAllStringSubmatch(metrics, -1)
		if !assert.Len(c, leaders, 1, "agents leading, by their metrics:\n%s", metrics) {
			return
		}
		assert.Regexp(c, `(?m)^reconkit_versiongate_phase\{name="agent-\d",phase="\w+"\} 1$`, metrics)
		assert.Regexp(c, `(?m)^reconkit_nodestatus_requests_total\{call="\w+",code="\d+",name="agent-\d",outcome="\w+"\} \d+$`, metrics)
		code, body := getBody("/healthz?verbose")
		assert.Equal(c, http.StatusOK, code, body)
		assert.Equal(c, "[+]agent-1 ok\n[+]agent-2 ok\n[+]agent-3 ok\nhealthz check passed\n", body)
		code, body = getBody("/healthz/" + leaders[0][1] + "?verbose")
		assert.Equal(c, http.StatusOK, code, body)
		if assert.Equal(c, "[+]leaderElection ok\n[+]nodeHeartbeat ok\n[+]releaseRecord ok\n[+]configTrial ok\nhealthz check passed\n", body) {
			leader = leaders[0][1]
		}
	}, 2*time.Minute, 500*time.Millisecond, "the steady cluster's metrics and health")

	// No etcd: the election and the gate are Leases in the namespace.
	leases, err := kube.CoordinationV1().Leases("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, l := range leases.Items {
		names = append(names, l.Name)
	}
	// The gate's: its status, its reaper, and per agent a record
	// (<gate>-<id>, written once) and the heartbeat that keeps it alive
	// (<gate>.<id>).
	require.ElementsMatch(t, []string{"nodeagent-election", "nodeagent-gate-status", "nodeagent-gate-reaper",
		"nodeagent-gate-agent-1", "nodeagent-gate-agent-2", "nodeagent-gate-agent-3",
		"nodeagent-gate.agent-1", "nodeagent-gate.agent-2", "nodeagent-gate.agent-3"}, names)

	// The broadcaster sends events in the background: they reach the
	// API a little after the leader took its term.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		evs, err := kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node,reason=LeaderElected"})
		if !assert.NoError(c, err) {
			return
		}
		var on []string
		for _, ev := range evs.Items {
			on = append(on, ev.InvolvedObject.Name)
		}
		assert.Contains(c, on, leader, "LeaderElected events are on Nodes %v", on)
	}, 2*time.Minute, 200*time.Millisecond, "no LeaderElected event on the leader's Node")

	stopped = true
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	var r result
	select {
	case r = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the program did not stop within 2m of SIGINT")
	}
	require.NoError(t, r.err, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	_, err = web.Get(base + "/healthz")
	require.Error(t, err, "the HTTP server outlived the program")
	checkNothingLeft(t, r.stdout, false, false)
	// The cluster outlives the run: its Leases are gone, the gate status'
	// finalizer removed first.
	leases, err = kube.CoordinationV1().Leases("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, leases.Items, "the run left Leases behind")
}

// testInterrupt runs with no flags at all, as the README's first command
// does (so on the Kubernetes store, with no etcd for the agents), until
// the cluster is steady, then sends SIGINT: the program must stop cleanly and leave nothing behind.
func testInterrupt(t *testing.T, bin string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd, lines, done := start(t, ctx, bin)
	steady := false
	for l := range lines {
		if strings.Contains(l, "status=done@1.0.0") && strings.Count(l, " ready ") == 3 {
			steady = true
			break
		}
	}
	require.True(t, steady, "the cluster never became steady")
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	var r result
	select {
	case r = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the program did not stop within 2m of SIGINT")
	}
	var exit *exec.ExitError
	if errors.As(r.err, &exit) {
		t.Fatalf("exit status %v\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
	}
	require.NoError(t, r.err)
	require.Contains(t, r.stdout, "interrupted: stopping every agent")
	checkNothingLeft(t, r.stdout, true, false)
}

var (
	upgradeRE   = regexp.MustCompile(`^VERDICT upgrade: PASS release=1\.1\.0 leader=agent-\d restricted-steps=2 status=done@1\.1\.0/min1\.1\.0 binds=192\.0\.2\.10:443,192\.0\.2\.10:80 took=[\d.]+s$`)
	fenceRE     = regexp.MustCompile(`^VERDICT fence: PASS deposed=(agent-\d) token=(\d+) successor=(agent-\d) token=(\d+) refused=create:\S+ stale-writes-applied=0 writes=\d+ binds=192\.0\.2\.10:80$`)
	failoverRE  = regexp.MustCompile(`^VERDICT failover: PASS killed=(agent-\d) successor=(agent-\d) took=([\d.]+)s token=(\d+)->(\d+) targets=(\S+)$`)
	badConfigRE = regexp.MustCompile(`^VERDICT bad-config: PASS rejected=AssignedValidateFailed rolled-back=TrialProbeFailed running=(\S+) reason="health probe failed .*maxConnections 10 is below.*"$`)
)

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
