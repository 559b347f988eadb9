package fleetsim

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/checkpointtest"
	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
)

// labelKey is the pprof label every goroutine of an agent's run carries
// (goroutines inherit their creator's labels), by which a run's leftover
// goroutines are found once it stopped.
const labelKey = "fleetsim.run"

// slot is one agent of the fleet across its runs: its disk survives them.
type slot struct {
	w     *world
	index int
	name  string
	ip    string
	fs    *checkpointtest.StrictFS
	boot  int // runs started so far

	// The current run, or the last one; cancel is nil when none runs.
	kube    *kubefake.Client
	link    *link
	label   string
	cancel  context.CancelFunc
	done    chan error
	started time.Time
	ran     time.Duration
	req     *meter // this run's apiserver requests
	// emptyWatches makes every watch of this run end at once, empty.
	emptyWatches atomic.Bool
	// gone is what this run's watches were answered 410 Gone from.
	gone gone
	// partitioned is set while the nemesis keeps this run's client cut.
	partitioned atomic.Bool
	// reached is when this run's client last reached the apiserver again
	// (its start, or the heal of a partition), in Unix nanoseconds; up is
	// set while a run lasts. The checks read both from their goroutines.
	reached atomic.Int64
	up      atomic.Bool
	// pings is the current run's link, for the checks (Deps.Ping).
	pings atomic.Pointer[link]
	// release is the current run's, Config.Gate.Releases[releaseIndex].
	release      versiongate.Version
	releaseIndex int
	// clock is the agent's clock, across its runs (ClockDrift).
	clock *driftClock
	// watchDelay is how much later than the write each run's watches see
	// a change (kubefake.Client.SetWatchDelay), drawn from the seed.
	watchDelay time.Duration
	// slow delays this run's requests (SlowReads, SlowWrites).
	slow slowness
	// record is the latest checkpoint record of any run (Deps.Checkpoint).
	recordMu sync.Mutex
	record   checkpoint.State
}

const stateDir = "/var/lib/agent"

func newSlot(w *world, i int) *slot {
	s := &slot{w: w, index: i, name: fmt.Sprintf("agent-%d", i), ip: fmt.Sprintf("10.0.0.%d", i+1),
		fs: checkpointtest.NewStrictFS(), clock: newDriftClock()}
	if len(w.cfg.Gate.Releases) > 0 {
		s.release = w.cfg.Gate.Releases[0]
	}
	s.fs.MkdirAll(stateDir)
	return s
}

func (s *slot) running() bool { return s.cancel != nil }

// deps returns what the current run gets; without live, only the names.
func (s *slot) deps(live bool) Deps {
	d := Deps{Name: s.name, Index: s.index, IP: s.ip, Boot: s.boot - 1, FS: s.fs, Dir: stateDir,
		Clock: s.clock, Release: s.release, Serving: func(bool) {}, Checkpoints: func(c checkpoint.LKGStore) checkpoint.LKGStore { return c }}
	if live {
		d.Kube, d.Engine, d.Ping = s.kube, s.link, s.link.ping
		d.Serving, d.Checkpoints = s.w.servingFunc(s, s.release.Release), s.w.watchCheckpoints(s)
	}
	return d
}

// start begins a new run of s on a new client and a new provider link.
func (w *world) start(ctx context.Context, s *slot) {
	s.boot++
	s.kube = w.server.NewClient()
	s.kube.SetWatchDelay(s.watchDelay)
	s.link = &link{w: w, s: s, e: w.fenced, req: newMeter(w, s, "provider", false)}
	s.pings.Store(s.link)
	s.req = newMeter(w, s, "apiserver", true)
	s.kube.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		w.before(s, a)
		return false, nil, nil
	})
	s.emptyWatches.Store(false)
	s.partitioned.Store(false)
	s.gone.mu.Lock()
	s.gone.from = nil
	s.gone.mu.Unlock()
	s.slow.reads.Store(0)
	s.slow.writes.Store(0)
	s.kube.PrependReactor("*", "*", s.slowReactor()) // first: it waits before the request is counted and served
	s.kube.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		w.before(s, a)
		if s.emptyWatches.Load() {
			ended := watch.NewEmptyWatch() // its result channel is closed
			return true, ended, nil
		}
		return w.watchThrough(s, a)
	})
	runCtx, cancel := context.WithCancel(ctx)
	log := w.cfg.Logger
	if log.GetSink() == nil {
		log = funcr.New(func(prefix, args string) { w.tl.add(s.name, "log: %s", args) }, funcr.Options{Verbosity: w.cfg.LogVerbosity})
	}
	runCtx = logr.NewContext(runCtx, log.WithName(s.name))
	s.cancel, s.done, s.started = cancel, make(chan error, 1), time.Now()
	s.reached.Store(time.Now().UnixNano())
	s.up.Store(true)
	s.label = fmt.Sprintf("%s/%s#%d", w.id, s.name, s.boot)
	d := s.deps(true)
	done := s.done
	w.tl.add(s.name, "starts (run %d)", s.boot)
	go pprof.Do(runCtx, pprof.Labels(labelKey, s.label), func(ctx context.Context) {
		err := w.cfg.Agent(ctx, d)
		if ctx.Err() == nil {
			w.violate(Lives, s.name, "Run returned %v while its context was live", err)
		}
		done <- err
	})
}

// before counts a request of s's current run. It runs on the requesting
// goroutine, inside the client, with the client's lock held: it must not
// block (a goroutine waiting for that lock would stop simulated time).
func (w *world) before(s *slot, a k8stesting.Action) {
	what := a.GetVerb() + " " + a.GetResource().Resource
	if sub := a.GetSubresource(); sub != "" {
		what += "/" + sub
	}
	if name := actionName(a); name != "" {
		what += " " + name
	}
	switch a := a.(type) {
	case k8stesting.ListAction:
		what += restrictions(a.GetListRestrictions())
	case k8stesting.WatchAction:
		r := a.GetWatchRestrictions()
		what += restrictions(k8stesting.ListRestrictions{Labels: r.Labels, Fields: r.Fields})
	}
	s.req.add(what)
	w.mu.Lock()
	w.requests++
	w.mu.Unlock()
}

// actionName returns the name of the object a request is for: the name a
// get, delete or patch carries, or the name of the object a create or
// update sends ("" for a list, a watch, or an object named by the server),
// so that the renewals of two Leases are two kinds of request, as they are
// two loops.
func actionName(a k8stesting.Action) string {
	if named, ok := a.(interface{ GetName() string }); ok && named.GetName() != "" {
		return named.GetName()
	}
	if o, ok := a.(interface{ GetObject() runtime.Object }); ok && o.GetObject() != nil {
		if m, err := meta.Accessor(o.GetObject()); err == nil {
			return m.GetName()
		}
	}
	return ""
}

// restrictions describes a list's or watch's selectors, "" without any.
func restrictions(r k8stesting.ListRestrictions) string {
	var out string
	if r.Labels != nil && !r.Labels.Empty() {
		out += " " + r.Labels.String()
	}
	if r.Fields != nil && !r.Fields.Empty() {
		out += " " + r.Fields.String()
	}
	return out
}

// stop ends s's current run. A crash first cuts its client and provider link
// and freezes its disk, so that nothing it does on its way out reaches the
// world (as a process killed by a power loss does nothing), then drops what
// its disk had not synced. Either way the run must return within
// StopTimeout, with nil, and leave no goroutine.
func (w *world) stop(s *slot, crash bool) {
	if crash {
		s.kube.Cut()
		s.link.cut.Store(true)
		s.fs.Fault(func(checkpointtest.Op, string) error { return checkpointtest.ErrCrashed })
		w.tl.add(s.name, "crashes (power loss)")
	} else {
		w.tl.add(s.name, "stops")
	}
	s.up.Store(false)
	w.notServing(s)
	s.cancel()
	s.cancel = nil
	s.ran += time.Since(s.started)
	select {
	case err := <-s.done:
		if err != nil && !crash {
			w.violate(Stops, s.name, "Run returned %v after its context ended, want nil", err)
		}
	case <-time.After(w.cfg.StopTimeout):
		w.violate(Stops, s.name, "Run has not returned %s after its context ended", w.cfg.StopTimeout)
		return
	}
	if crash {
		s.fs.Crash()
	}
	settle()
	if left := goroutines(s.label); left != "" {
		w.violate(Stops, s.name, "goroutines left after Run returned:\n%s", left)
	}
}

// goroutines returns the stacks of the goroutines labelled label, or "".
func goroutines(label string) string {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		return ""
	}
	want := fmt.Sprintf("%q:%q", labelKey, label)
	var left []string
	for _, block := range strings.Split(buf.String(), "\n\n") {
		if strings.Contains(block, want) {
			left = append(left, block)
		}
	}
	return strings.Join(left, "\n\n")
}
