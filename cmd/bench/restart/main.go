package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/reconkit/reconkit/internal/servers"
)

var (
	mode    = flag.String("mode", "real", "real: the apiserver restart; fake: other packages' loops under persistent answers on kubefake")
	nAgents = flag.Int("agents", 50, "agents on each side")
	settle  = flag.Duration("settle", 40*time.Second, "time for every agent to register and settle before measuring")
	steady  = flag.Duration("steady", 30*time.Second, "steady-state window measured before the restart")
	after   = flag.Duration("after", time.Minute, "window measured after the apiserver is ready again")
)

const (
	namespace = "kube-system"
	configMap = "agent-config"
)

func main() {
	testing.Init()
	flag.Parse()
	if *mode == "fake" {
		fakeMode()
		return
	}
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "restart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	bins, err := servers.Build(ctx, servers.BuildOptions{Logf: logf})
	if err != nil {
		return err
	}
	a, err := servers.StartAPIServer(ctx, servers.APIServerOptions{Binaries: bins})
	if err != nil {
		return err
	}
	defer a.Close()
	admin, err := kubernetes.NewForConfig(a.Config())
	if err != nil {
		return err
	}
	if err := waitFor(ctx, time.Minute, func() bool {
		_, err := admin.CoreV1().Namespaces().Get(ctx, corev1.NamespaceNodeLease, metav1.GetOptions{})
		return err == nil
	}); err != nil {
		return fmt.Errorf("namespace %s: %w", corev1.NamespaceNodeLease, err)
	}
	if _, err := admin.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: configMap},
		Data:       map[string]string{"config": "level=4"},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}

	sides := []*side{
		{name: "reconkit (nodestatus + configmapsource)", rec: newRecorder()},
		{name: "kubelet-style (lease controller, node status, reflectors)", rec: newRecorder()},
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range *nAgents {
		for k, s := range sides {
			cs, err := kubernetes.NewForConfig(counted(a.Config(), s.rec))
			if err != nil {
				cancel()
				return err
			}
			if k == 0 {
				err = startReconkit(runCtx, &wg, cs, fmt.Sprintf("rk-%03d", i))
			} else {
				err = startKubelet(runCtx, &wg, cs, fmt.Sprintf("kl-%03d", i))
			}
			if err != nil {
				cancel()
				return err
			}
		}
	}
	defer func() { cancel(); wg.Wait() }()
	logf("%d agents on each side started; settling for %v", *nAgents, *settle)
	time.Sleep(*settle)

	t0 := time.Now()
	time.Sleep(*steady)
	stop := time.Now()
	logf("restarting the apiserver")
	if err := a.Restart(ctx); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	ready := time.Now()
	logf("apiserver ready again after %v; measuring %v", ready.Sub(stop).Round(time.Millisecond), *after)
	time.Sleep(*after)
	end := ready.Add(*after)

	n := float64(*nAgents)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "real kube-apiserver v1.37.1, %d agents per side, each on a client of its own\t\n", *nAgents)
	fmt.Fprintf(w, "apiserver down (SIGTERM to ready)\t%v\t\n\n", ready.Sub(stop).Round(time.Millisecond))
	type figures struct{ steady, down, after float64 }
	var got []figures
	for _, s := range sides {
		st := s.rec.window(t0, stop)
		dn := s.rec.window(stop, ready)
		af := s.rec.window(ready, end)
		f := figures{
			steady: float64(st.total) / n / stop.Sub(t0).Seconds(),
			down:   float64(dn.total) / n / ready.Sub(stop).Seconds(),
			after:  float64(af.total) / n / end.Sub(ready).Seconds(),
		}
		got = append(got, f)
		fmt.Fprintf(w, "%s\t\n", s.name)
		fmt.Fprintf(w, "  steady state, requests/agent/s\t%.3f\t\n", f.steady)
		fmt.Fprintf(w, "  while down, requests/agent/s\t%.3f\t\n", f.down)
		fmt.Fprintf(w, "  first %v after ready, requests/agent/s\t%.3f\t(busiest second: %d requests from %d agents, %.2f per agent)\t\n", *after, f.after, af.peak, *nAgents, float64(af.peak)/n)
		fmt.Fprintf(w, "  first %v after ready, by kind (per agent)\t%s\t\n", *after, af.kinds(n))
	}
	fmt.Fprintf(w, "\nreconkit / kubelet-style\t\n")
	fmt.Fprintf(w, "  steady state\t%s\t\n", ratio(got[0].steady, got[1].steady))
	fmt.Fprintf(w, "  while down\t%s\t\n", ratio(got[0].down, got[1].down))
	fmt.Fprintf(w, "  first %v after ready\t%s\t\n", *after, ratio(got[0].after, got[1].after))
	return w.Flush()
}

type side struct {
	name string
	rec  *recorder
}

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// waitFor polls cond every 100 ms until it holds or d passes.
func waitFor(ctx context.Context, d time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// recorder keeps the time and kind of every request of one side.
type recorder struct {
	mu   sync.Mutex
	at   []time.Time
	kind []string
}

func newRecorder() *recorder { return &recorder{} }

func (r *recorder) add(kind string) {
	now := time.Now()
	r.mu.Lock()
	r.at = append(r.at, now)
	r.kind = append(r.kind, kind)
	r.mu.Unlock()
}

// counted returns cfg with every request recorded in rec, with no
// client-side rate limit (an agent's own client sends little), and with
// a transport and connections of its own: client-go shares one transport
// between configs that look alike, which a Proxy function (here, none)
// prevents.
func counted(cfg *rest.Config, rec *recorder) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	cfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			rec.add(kindOf(req))
			return rt.RoundTrip(req)
		})
	}
	return cfg
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// kindOf names a request "VERB resource[/status]", WATCH for watches.
func kindOf(req *http.Request) string {
	p := req.URL.Path
	res := "other"
	for _, r := range []string{"leases", "nodes", "configmaps", "pods"} {
		if strings.Contains(p, "/"+r) {
			res = r
		}
	}
	if strings.HasSuffix(p, "/status") {
		res += "/status"
	}
	verb := req.Method
	if req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1" {
		verb = "WATCH"
	} else if verb == http.MethodGet && !strings.Contains(p, "/"+res+"/") {
		verb = "LIST"
	}
	return verb + " " + res
}

// stats are one side's requests in a window.
type stats struct {
	total int
	peak  int // most requests in one second of the window
	by    map[string]int
}

func (r *recorder) window(from, to time.Time) stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := stats{by: map[string]int{}}
	perSec := map[int]int{}
	for i, t := range r.at {
		if t.Before(from) || !t.Before(to) {
			continue
		}
		st.total++
		st.by[r.kind[i]]++
		s := int(t.Sub(from) / time.Second)
		perSec[s]++
		st.peak = max(st.peak, perSec[s])
	}
	return st
}

func (s stats) kinds(n float64) string {
	var keys []string
	for k := range s.by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(s.by[k])/n))
	}
	return strings.Join(parts, ", ")
}
