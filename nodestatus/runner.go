package nodestatus

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/internal/jitter"
)

// spread returns d times a factor drawn from r uniformly in [lo, hi).
func spread(r func() float64, d time.Duration, lo, hi float64) time.Duration {
	return time.Duration(float64(d) * (lo + jitter.Float64(r)*(hi-lo)))
}

func stopTimer(t clock.Timer) {
	if !t.Stop() {
		select {
		case <-t.C():
		default:
		}
	}
}

// runner is the state of one Run, owned by Run's goroutine. It is one
// allocation, and the loop's methods keep small stack frames: an idle
// controller's goroutine then fits in a small stack.
type runner struct {
	c         *NodeController
	ctx, wctx context.Context    // Run's, and the workers' (ended first)
	cancel    context.CancelFunc // ends wctx
	log       logr.Logger
	wg        sync.WaitGroup
	// results carries the workers' leaseResult, statusResult and
	// pingDone: at most one of each is in flight, so sends never block.
	results chan any
	fatal   error // set by a handler that cannot return it: Run stops

	timers [nDeadlines]clock.Timer // ping, lease, report

	server     *packedNode // the served Node, without its spec
	registered bool
	lease      []byte // the Lease as last written or read, see packLease
	leaseOff   bool   // heartbeats are status writes (disabled or unsupported)
	lastRenew  time.Time

	leaseBusy, statusBusy, pingBusy bool
	leaseAwaitsNode                 bool // renew once the Node was checked

	statusDirty, heartbeatDue bool
	refused                   *refusal // see statusJob
	// checkNode is set after a transition that can leave the served Node
	// other than this controller last saw it (heartbeats that failed or
	// were stopped, a lease that vanished): the next status job reads the
	// Node linearizably and writes a heartbeat against that copy, a patch
	// the API server checks by resourceVersion, so that a write by the
	// node lifecycle controller before or after the read is overwritten.
	checkNode bool
	// limited is set while Run holds a unit of Config.Limiter, which the
	// first status job takes over: the loop starts that job before it
	// waits for anything, so the unit is never left with the runner.
	limited bool

	ping        pingState
	pingStart   time.Time
	pingTimeout bool
	pingCancel  context.CancelFunc
	// pingStarted is set by the ping goroutine as it calls Ping: the
	// timeout measures the provider's ping, not the scheduler's delay in
	// starting the goroutine.
	pingStarted *atomic.Bool
	// pingReturned is set by the ping goroutine once Ping has returned:
	// its result is on its way to the loop, so the loop is not quiet.
	pingReturned *atomic.Bool
}

// newRunner starts the provider's notifications and the first ping.
func (c *NodeController) newRunner(ctx context.Context) *runner {
	log := c.log(ctx).WithValues("node", c.name)
	ctx = logr.NewContext(ctx, log)
	wctx, cancel := context.WithCancel(ctx)
	r := &runner{
		c: c, ctx: ctx, wctx: wctx, cancel: cancel, log: log,
		results:  make(chan any, 3),
		leaseOff: c.cfg.DisableLease, statusDirty: true, heartbeatDue: true,
		limited: c.cfg.Limiter != nil,
	}
	c.cfg.Provider.NotifyNodeStatus(wctx, c.notifyStatus)
	for k := range r.timers {
		r.timers[k] = c.clk.NewTimer(time.Hour)
		stopTimer(r.timers[k])
	}
	r.startPing()
	return r
}

// stop ends the workers, waits for them, performs the shutdown action and
// returns Run's result.
func (r *runner) stop(fatal error) error {
	c := r.c
	r.cancel()
	r.wg.Wait()
	for _, t := range r.timers {
		t.Stop()
	}
	if fatal != nil {
		return fmt.Errorf("nodestatus: node %s: %w", c.name, fatal)
	}
	if r.registered && c.cfg.OnShutdown != ShutdownNone {
		sctx, scancel := context.WithTimeout(context.WithoutCancel(r.ctx), c.cfg.ShutdownTimeout)
		defer scancel()
		if err := c.shutdown(sctx, r.server.uid); err != nil {
			r.log.Error(err, "Shutdown action failed", "action", c.cfg.OnShutdown)
			return fmt.Errorf("nodestatus: node %s: shutdown: %w", c.name, err)
		}
	}
	return nil
}

// loop runs until ctx ends (nil) or a worker fails for good.
func (r *runner) loop() error {
	for r.fatal == nil {
		r.startStatus()
		select {
		case <-r.ctx.Done():
			return nil
		case <-r.c.notify:
			r.statusDirty = true
		case <-r.timers[deadlinePing].C():
			r.onPingTimer()
		case <-r.timers[deadlineLease].C():
			r.onLeaseTimer()
		case <-r.timers[deadlineReport].C():
			r.statusDirty, r.heartbeatDue = true, true
		case v := <-r.results:
			r.dispatch(v)
		case reply := <-r.c.probe:
			reply <- probeReply{quiet: r.quiet(), pinging: r.pingBusy}
		}
	}
	return r.fatal
}

// quiet reports whether the loop has nothing to do until a timer fires: no
// lease or status job at work (one may wait for a retry that is not due),
// and no result, notification or fired timer waiting for it. A ping may be
// running (its timeout is armed), but not one that has returned: its result
// is on its way.
func (r *runner) quiet() bool {
	if !r.c.jobs.idle(r.c.clk.Now()) || len(r.results) > 0 || len(r.c.notify) > 0 {
		return false
	}
	if r.pingBusy && r.pingReturned.Load() {
		return false
	}
	for _, t := range r.timers {
		if len(t.C()) > 0 {
			return false
		}
	}
	return true
}

// probeReply is the loop's answer to a test's probe: whether it is quiet,
// and whether a ping it started has not been handled yet. A quiet loop may
// be waiting for a ping that hangs, or for one whose goroutine the
// scheduler has not run to its end; only the test knows which (its
// provider does), and a fake clock stepped over the second times it out.
type probeReply struct{ quiet, pinging bool }

// Timers kept by a runner.
const (
	deadlinePing = iota
	deadlineLease
	deadlineReport
	nDeadlines
)

// arm sets timer k to fire d from now.
func (r *runner) arm(k int, d time.Duration) {
	t := r.timers[k]
	stopTimer(t)
	t.Reset(d)
}

// disarm stops timer k.
func (r *runner) disarm(k int) { stopTimer(r.timers[k]) }

// pingDone is a ping's result.
type pingDone struct{ err error }

// dispatch hands a worker's result to its handler.
func (r *runner) dispatch(v any) {
	var err error
	switch v := v.(type) {
	case leaseResult:
		err = r.onLeaseDone(v)
	case statusResult:
		err = r.onStatusDone(v)
	case pingDone:
		r.pingResult(v.err)
	}
	if err != nil && r.fatal == nil {
		r.fatal = err
	}
}

func (r *runner) renew() time.Duration {
	return spread(r.c.rand.run, r.c.cfg.RenewInterval, 1, 1+r.c.cfg.RenewJitter)
}

func (r *runner) heartbeatsStopped() bool {
	return r.ping.failing && r.c.cfg.PingFailure == PingFailureStopHeartbeat
}

func (r *runner) markReady() {
	select {
	case <-r.c.ready:
	default:
		if r.registered && (r.leaseOff || !r.lastRenew.IsZero()) {
			r.log.V(1).Info("Node is ready")
			close(r.c.ready)
		}
	}
}

func (r *runner) startLease() {
	if r.leaseBusy || r.leaseOff || r.server == nil || r.heartbeatsStopped() {
		return
	}
	r.leaseBusy = true
	r.c.jobs.start()
	job := leaseJob{last: r.lease, owner: r.server.uid}
	r.wg.Go(func() { r.results <- r.c.renewLease(r.wctx, job) })
}

func (r *runner) startStatus() {
	if r.statusBusy || !r.statusDirty {
		return
	}
	job := statusJob{
		refused:     r.refused,
		heartbeat:   r.heartbeatDue && !r.heartbeatsStopped(),
		noHeartbeat: r.heartbeatsStopped(),
		uncordon:    !r.registered,
		registered:  r.registered,
		limited:     r.limited,
	}
	r.limited = false
	if r.checkNode {
		job.fresh, job.heartbeat = true, !r.heartbeatsStopped()
	} else {
		job.server = r.server
	}
	r.statusBusy, r.statusDirty, r.heartbeatDue, r.checkNode = true, false, false, false
	r.c.jobs.start()
	r.wg.Go(func() { r.results <- r.c.syncStatus(r.wctx, job) })
}

func (r *runner) startPing() {
	pctx, pcancel := context.WithCancel(r.wctx)
	started, returned := new(atomic.Bool), new(atomic.Bool)
	r.pingBusy, r.pingStart, r.pingTimeout, r.pingCancel, r.pingStarted, r.pingReturned = true, r.c.clk.Now(), false, pcancel, started, returned
	r.wg.Go(func() {
		started.Store(true)
		start := r.c.clk.Now()
		err := r.c.cfg.Provider.Ping(pctx)
		returned.Store(true)
		o := Observation{Call: CallPing, Outcome: OutcomeOK, Latency: r.c.clk.Since(start)}
		switch {
		case r.wctx.Err() != nil:
			o.Outcome = OutcomeCanceled
		case err != nil || pctx.Err() != nil:
			o.Outcome = OutcomeFailed
		}
		r.c.metrics.Observe(o)
		r.results <- pingDone{err}
	})
	r.arm(deadlinePing, r.c.cfg.PingTimeout)
}

// renewNow starts a renewal at once (a zero-length timer would wait for a
// fake clock's next step); its result re-arms the timer.
func (r *runner) renewNow() {
	r.disarm(deadlineLease)
	if r.leaseBusy {
		return
	}
	r.startLease()
	if !r.leaseBusy {
		r.arm(deadlineLease, r.renew())
	}
}

func (r *runner) pingTimedOut() pingState {
	return pingState{failing: true, message: fmt.Sprintf("ping did not return within %v", r.c.cfg.PingTimeout)}
}

func (r *runner) pingResult(perr error) {
	r.pingBusy = false
	r.pingCancel()
	ps := pingState{}
	if r.pingTimeout {
		ps = r.pingTimedOut()
	} else if perr != nil {
		ps = pingState{failing: true, message: truncate(perr.Error(), maxMessage)}
	}
	wasStopped := r.heartbeatsStopped()
	r.c.setPing(r.ctx, r, ps)
	if wasStopped && !r.heartbeatsStopped() && r.registered {
		// Heartbeats resume at once, and the node lifecycle controller
		// may have marked the Node Unknown meanwhile: check it.
		r.statusDirty, r.checkNode = true, true
		if !r.leaseOff {
			r.renewNow()
		}
	}
	r.arm(deadlinePing, max(0, r.c.cfg.PingInterval-r.c.clk.Since(r.pingStart)))
}

func (r *runner) onPingTimer() {
	if !r.pingBusy {
		r.startPing()
		return
	}
	// A ping that finished just now is not a timeout: take the results
	// that are in.
	for r.pingBusy && r.fatal == nil {
		select {
		case v := <-r.results:
			r.dispatch(v)
			continue
		default:
		}
		break
	}
	if !r.pingBusy || r.fatal != nil {
		return
	}
	if !r.pingStarted.Load() {
		// The goroutine has not even begun (a starved scheduler, or a
		// fake clock stepped at once): time the ping itself.
		r.arm(deadlinePing, r.c.cfg.PingTimeout)
		return
	}
	if !r.pingTimeout {
		// The ping outlived its timeout: cancel it and report.
		r.pingTimeout = true
		r.pingCancel()
		r.c.setPing(r.ctx, r, r.pingTimedOut())
	}
	r.arm(deadlinePing, r.c.cfg.PingInterval)
}

func (r *runner) onLeaseTimer() {
	switch {
	case r.heartbeatsStopped():
		r.arm(deadlineLease, r.renew())
	case r.leaseOff:
		r.statusDirty, r.heartbeatDue = true, true
		r.arm(deadlineLease, r.renew())
	default:
		r.startLease()
	}
}

func (r *runner) onLeaseDone(res leaseResult) error {
	r.leaseBusy = false
	r.c.jobs.done()
	now := r.c.clk.Now()
	switch {
	case res.err != nil:
		return res.err
	case res.unsupported:
		r.log.Info("Falling back to status heartbeats", "reason", ErrLeaseUnsupported.Error())
		r.leaseOff, r.lease = true, nil
		r.statusDirty, r.heartbeatDue = true, true
		r.arm(deadlineLease, r.renew())
	case res.gone:
		// The lease's linearizable read found the Node gone too. The
		// status job reads it again: it is registered again (by us with
		// ReRegister, or by someone else) under a new UID, whose arrival
		// creates the lease with its owner, or Run stops with
		// ErrNodeDeleted. A status job ends with a copy of the Node or
		// stops Run, so nothing need wait for the Node here.
		r.log.Info("Lease disappeared with its Node; checking the Node before creating the lease again")
		r.lease = nil
		r.statusDirty, r.checkNode = true, true
	case res.renewed:
		if res.failures > 0 {
			// Heartbeats failed for a while: the node lifecycle
			// controller may have marked the node Unknown meanwhile,
			// or may do so in a moment: check it.
			r.log.Info("Heartbeats succeed again; checking the Node", "failedAttempts", res.failures)
			r.statusDirty, r.checkNode = true, true
		}
		r.lease, r.lastRenew = res.lease, now
		r.c.lastBeat.Store(&now)
		r.c.renewal.Store(&leaseRenewal{sent: res.sent, uid: res.uid})
		r.arm(deadlineLease, r.renew())
		if res.recreated {
			// The lease vanished: most likely with its Node, which may
			// have been registered again by someone else.
			r.log.Info("Lease was recreated; checking the Node")
			r.leaseAwaitsNode = !res.ownerRead
			r.statusDirty, r.checkNode = true, true
		}
	}
	r.markReady()
	return nil
}

func (r *runner) onStatusDone(res statusResult) error {
	r.statusBusy = false
	r.c.jobs.done()
	r.refused = res.refused
	if res.err != nil {
		return res.err
	}
	if res.rejected != nil {
		r.log.Info("The provider's status was rejected by the API server; it is not sent again until it changes", "error", res.rejected.Error())
		r.c.events.Event(eventWarning, EventStatusRejected, truncate("The API server rejected the node's status; only what it accepts is written: "+res.rejected.Error(), maxMessage))
	}
	if res.created {
		if r.registered {
			r.c.events.Event(eventNormal, EventReRegistered, "Node "+r.c.name+" was deleted and has been registered again")
		} else {
			r.c.events.Event(eventNormal, EventRegistered, "Node "+r.c.name+" registered")
		}
	}
	if res.server != nil {
		uidChanged := r.server != nil && r.server.uid != res.server.uid
		r.server = res.server
		if res.created && r.registered {
			r.log.Info("Node was deleted; registered it again", "uid", res.server.uid)
		}
		if uidChanged || r.leaseAwaitsNode || !r.registered {
			// A first renewal, or a new owner reference for the lease.
			r.leaseAwaitsNode = false
			if r.leaseOff {
				r.arm(deadlineLease, r.renew())
			} else {
				r.renewNow()
			}
		}
	} else if r.leaseAwaitsNode && r.server != nil {
		r.leaseAwaitsNode = false
		r.renewNow()
	}
	if res.written && r.leaseOff {
		// Without leases, every status write is a heartbeat.
		now := r.c.clk.Now()
		r.c.lastBeat.Store(&now)
	}
	if res.written {
		// The first report after registration is spread over half the
		// interval, so that nodes started together do not report
		// together; later ones follow the interval exactly.
		next := r.c.cfg.StatusReportInterval
		if !r.registered {
			next = spread(r.c.rand.run, r.c.cfg.StatusReportInterval, 0.5, 1)
		}
		r.arm(deadlineReport, next)
	}
	if r.server != nil && !r.registered {
		r.registered = true
		if !res.written {
			r.arm(deadlineReport, spread(r.c.rand.run, r.c.cfg.StatusReportInterval, 0.5, 1))
		}
	}
	r.markReady()
	return nil
}

func (c *NodeController) setPing(ctx context.Context, st *runner, ps pingState) {
	if ps == st.ping {
		return
	}
	if ps.failing {
		c.log(ctx).Info("Ping failed", "message", ps.message)
	} else {
		c.log(ctx).Info("Ping succeeds again")
	}
	st.ping = ps
	c.ping.Store(&ps)
	if c.cfg.PingFailure == PingFailureSetNotReady {
		st.statusDirty = true
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
