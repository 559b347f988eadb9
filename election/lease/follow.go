package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/internal/jitter"
)

// followAction is what a follow step asks for next.
type followAction struct {
	done    bool      // stop following
	refresh bool      // read the Lease again at once (after a conflict)
	wakeAt  time.Time // call the step again at this instant (zero: no timer)
	// rereadAt reads the Lease again at this instant (zero: no timer),
	// as after repeated conflicts: one more read at once would meet the
	// same answer.
	rereadAt time.Time
}

// follow keeps up with the Lease and calls step with the newest
// observation: after every read, after every change the watch delivers,
// and at the instant the last step asked to be woken (the lease's local
// expiry). It lists the Lease by name, then watches it from the list's
// resourceVersion; while the watch cannot be established it polls every
// RetryPeriod (jittered, see retryWait), trying to re-establish it each
// time. A healthy watch costs
// no request per change.
//
// step runs on the calling goroutine. follow returns nil when step says
// done, or ctx.Err() when ctx ends.
func (e *Elector) follow(ctx context.Context, step func(context.Context, observation) followAction) error {
	log := logr.FromContextOrDiscard(ctx).WithValues("lease", e.cfg.Namespace+"/"+e.cfg.Name)
	f := follower{e: e, ctx: ctx, log: log}
	defer f.stop()
	needRead := true
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if needRead {
			needRead = false
			obs, err := f.read()
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				f.log.V(1).Info("reading the Lease failed; polling", "err", err)
				f.armPoll()
			} else {
				act := step(ctx, obs)
				if act.done {
					return nil
				}
				f.armWake(act.wakeAt)
				f.armReread(act.rereadAt)
				if act.refresh {
					needRead = true
					continue
				}
				f.ensureWatch()
			}
		}
		var (
			evc   <-chan watch.Event
			pollc <-chan time.Time
			wakec <-chan time.Time
		)
		if f.w != nil {
			evc = f.w.ResultChan()
		}
		if f.poll != nil {
			pollc = f.poll.C()
		}
		if f.wake != nil {
			wakec = f.wake.C()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-pollc:
			f.poll = nil
			needRead = true
		case <-wakec:
			f.wake = nil
			act := step(ctx, e.snapshot())
			if act.done {
				return nil
			}
			f.armWake(act.wakeAt)
			f.armReread(act.rereadAt)
			needRead = act.refresh
		case ev, ok := <-evc:
			obs, changed, reread := f.handle(ev, ok)
			needRead = reread
			if !changed {
				continue
			}
			act := step(ctx, obs)
			if act.done {
				return nil
			}
			f.armWake(act.wakeAt)
			f.armReread(act.rereadAt)
			needRead = needRead || act.refresh
		}
	}
}

// follower is the state of one follow loop.
type follower struct {
	e   *Elector
	ctx context.Context
	log logr.Logger

	rv         string          // resourceVersion to resume watching from
	w          watch.Interface // nil while not watching
	watchStart time.Time
	poll       clock.Timer // armed while the watch is down
	wake       clock.Timer // armed at the step's wake-up instant

	// namedUs is whether the last state of the Lease this loop saw, by a
	// read or the watch resuming from it, names this candidate's identity
	// as holder: the state right before the next watch event.
	namedUs bool
}

func (f *follower) selector() string {
	return fields.OneTermEqualSelector("metadata.name", f.e.cfg.Name).String()
}

// read lists the Lease by name and notes what it found.
func (f *follower) read() (observation, error) {
	ctx, cancel := context.WithTimeout(f.ctx, f.e.cfg.RenewDeadline)
	defer cancel()
	list, err := f.e.leases.List(ctx, metav1.ListOptions{FieldSelector: f.selector()})
	if err != nil {
		return observation{}, fmt.Errorf("listing Lease: %w", err)
	}
	f.rv = list.ResourceVersion
	// Only the Lease of that name counts, whatever else a server (or a
	// fake that ignores field selectors) returns.
	for i := range list.Items {
		if l := &list.Items[i]; l.Name == f.e.cfg.Name {
			f.namedUs = recordFromLease(l).Holder == f.e.cfg.Identity
			return f.e.note(l, l.ResourceVersion), nil
		}
	}
	f.namedUs = false
	return f.e.note(nil, list.ResourceVersion), nil
}

// witness follows the states of the Lease the watch delivers, one by one,
// and records in the elector a state that names this candidate as holder
// without an acquireTime right after a state that did not name it: the
// election controller's naming, seen as it happened (see coordinatedWait).
func (f *follower) witness(l *coordinationv1.Lease) {
	rec := recordFromLease(l)
	namesUs := rec.Holder == f.e.cfg.Identity
	if namesUs && !f.namedUs && rec.AcquireTime.IsZero() {
		f.e.mu.Lock()
		f.e.witnessed = l.ResourceVersion
		f.e.mu.Unlock()
	}
	f.namedUs = namesUs
}

// ensureWatch starts the watch if it is not running; if that fails, it arms
// the poll timer.
func (f *follower) ensureWatch() {
	if f.w != nil {
		return
	}
	w, err := f.e.leases.Watch(f.ctx, metav1.ListOptions{
		FieldSelector:       f.selector(),
		ResourceVersion:     f.rv,
		AllowWatchBookmarks: true,
	})
	if err != nil {
		if f.ctx.Err() == nil {
			f.log.V(1).Info("watching the Lease failed; polling", "err", err)
		}
		f.armPoll()
		return
	}
	f.w, f.watchStart = w, f.e.clock.Now()
	if f.poll != nil {
		f.poll.Stop()
		f.poll = nil
	}
}

// handle digests one watch event. It returns the newest observation and
// whether the Lease changed, or asks for a fresh read when the watch ended.
func (f *follower) handle(ev watch.Event, ok bool) (obs observation, changed, reread bool) {
	if !ok || ev.Type == watch.Error {
		if ev.Type == watch.Error {
			f.log.V(1).Info("the Lease watch failed", "err", apierrors.FromObject(ev.Object))
		}
		f.w.Stop()
		f.w = nil
		// A watch that ends soon after it started (an apiserver refusing
		// it, a resourceVersion too old) is not retried at once: poll.
		if f.e.clock.Since(f.watchStart) < f.e.cfg.RetryPeriod {
			f.armPoll()
			return observation{}, false, false
		}
		if !ok { // the server ended a long watch: resume where it left off
			f.ensureWatch()
			return observation{}, false, false
		}
		return observation{}, false, true
	}
	switch ev.Type {
	case watch.Added, watch.Modified:
		l, isLease := ev.Object.(*coordinationv1.Lease)
		if !isLease {
			return observation{}, false, false
		}
		f.rv = l.ResourceVersion
		f.witness(l)
		return f.e.note(l, l.ResourceVersion), true, false
	case watch.Deleted:
		rv := ""
		if l, isLease := ev.Object.(*coordinationv1.Lease); isLease {
			rv = l.ResourceVersion
			f.rv = rv
		}
		f.namedUs = false
		return f.e.note(nil, rv), true, false
	case watch.Bookmark:
		if l, isLease := ev.Object.(*coordinationv1.Lease); isLease {
			f.rv = l.ResourceVersion
		}
	}
	return observation{}, false, false
}

// armPoll arms the poll timer, unless armed already, for RetryPeriod
// spread as client-go's candidates spread their retries (up to 1.2 ×
// RetryPeriod more), so that followers whose watches one apiserver
// restart ended do not poll in step.
func (f *follower) armPoll() {
	if f.poll == nil {
		f.poll = f.e.clock.NewTimer(f.e.retryWait())
	}
}

// armReread arms the poll timer for the instant at, unless it is zero or
// the timer is armed already: the poll reads the Lease when it fires.
func (f *follower) armReread(at time.Time) {
	if at.IsZero() || f.poll != nil {
		return
	}
	f.poll = f.e.clock.NewTimer(max(at.Sub(f.e.clock.Now()), 0))
}

// retryWait is the wait before a retry of a failed read or write:
// RetryPeriod plus up to leaseJitter × RetryPeriod, as client-go's
// candidates wait between attempts (wait.JitterUntil with JitterFactor
// 1.2).
func (e *Elector) retryWait() time.Duration {
	return jitter.Up(e.rand.follow, e.cfg.RetryPeriod, leaseJitter)
}

func (f *follower) armWake(at time.Time) {
	if f.wake != nil {
		f.wake.Stop()
		f.wake = nil
	}
	if at.IsZero() {
		return
	}
	f.wake = f.e.clock.NewTimer(max(at.Sub(f.e.clock.Now()), 0))
}

func (f *follower) stop() {
	if f.w != nil {
		f.w.Stop()
	}
	if f.poll != nil {
		f.poll.Stop()
	}
	if f.wake != nil {
		f.wake.Stop()
	}
}
