package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/reconkit/reconkit/events"
	"github.com/reconkit/reconkit/healthz"
	"github.com/reconkit/reconkit/prommetrics"
)

// hooks are the metrics hooks of one agent, every series labelled with
// the agent's name.
type hooks = prommetrics.Hooks

// ops is what an operator sees of the run: one Prometheus registry fed by
// every package of every agent, and each agent's health checks. It serves
// them over HTTP with --http.
type ops struct {
	reg *prometheus.Registry

	mu     sync.Mutex
	hooks  map[string]hooks            // by agent name, made once
	health map[string]*healthz.Handler // the current agent of each name
}

func newOps() *ops {
	return &ops{reg: prometheus.NewRegistry(), hooks: map[string]hooks{}, health: map[string]*healthz.Handler{}}
}

// hooksFor returns the metrics hooks of the agent called name. They are
// made on the first call and shared by every later agent of that name (a
// restarted one), since a version gate's hook may be made once per name
// and registry.
func (o *ops) hooksFor(name string) (hooks, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if h, ok := o.hooks[name]; ok {
		return h, nil
	}
	h, err := prommetrics.Agent(o.reg, name, nil)
	if err != nil {
		return hooks{}, fmt.Errorf("metrics of %s: %w", name, err)
	}
	o.hooks[name] = h
	return h, nil
}

// setHealth makes h the health checks of the agent called name.
func (o *ops) setHealth(name string, h *healthz.Handler) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.health[name] = h
}

// handler serves /metrics from the registry, /healthz with one check per
// agent, which fails naming that agent's failed checks (the format of the
// Kubernetes components' /healthz: 200 "ok", or 500 with a line per
// agent; ?verbose and ?exclude=agent-N work), and /healthz/<agent> with
// that agent's checks, one line each.
func (o *ops) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		var checks []healthz.Check
		for _, name := range slices.Sorted(maps.Keys(o.health)) {
			checks = append(checks, healthz.Check{Name: name, Checker: o.health[name].Check})
		}
		o.mu.Unlock()
		h, err := healthz.New(checks...)
		if err != nil { // agent names are valid check names
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		h.ServeHTTP(w, r)
	})
	mux.HandleFunc("GET /healthz/{agent}", func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		h := o.health[r.PathValue("agent")]
		o.mu.Unlock()
		if h == nil {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
	return mux
}

// listen listens on addr (which may name port 0) for serve.
func (o *ops) listen(ctx context.Context, addr string) (net.Listener, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http: %w", err)
	}
	return ln, nil
}

// serve serves the handler on ln until ctx ends, then shuts the server
// down gracefully (requests in flight get 10s to finish) and returns nil.
// It returns an error if serving fails before that.
func (o *ops) serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: o.handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("--http: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("--http shutdown: %w", err)
	}
	return nil
}

// eventBroadcaster sends the events of every agent to the Kubernetes API
// through client-go's broadcaster.
type eventBroadcaster struct {
	b record.EventBroadcaster
}

func newEventBroadcaster(kube kubernetes.Interface) *eventBroadcaster {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	return &eventBroadcaster{b: b}
}

// forNode returns the recorder of the agent called name: every event is
// about its Node, named as the kubelet names its own (UID = node name),
// so that kubectl describe node lists them.
func (e *eventBroadcaster) forNode(name string) events.Recorder {
	rec := e.b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "nodeagent", Host: name})
	return events.ForObject(rec, &corev1.ObjectReference{Kind: "Node", Name: name, UID: types.UID(name)})
}

// shutdown stops the broadcaster; events still queued may be dropped.
func (e *eventBroadcaster) shutdown() { e.b.Shutdown() }
