package nodestatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/backoff"
)

// ErrAlreadyStarted is returned by a second call to Run.
var ErrAlreadyStarted = errors.New("nodestatus: Run called twice")

// Retry settings for API calls: like the kubelet's lease controller, start
// fast; unlike its 7s cap (8.4s with jitter), no wait is longer than
// retryMaxWait, jitter included, so that after an outage heals the next
// attempt comes within it.
const (
	retryInitial = 200 * time.Millisecond
	retryJitter  = 0.2 // the backoff package's default: ±20%
	retryMaxWait = 5 * time.Second
	// retryMaxInterval is the backoff cap before jitter.
	retryMaxInterval = retryMaxWait * 5 / 6 // (1 + retryJitter) = 6/5
	// retryFirstMax is the longest first retry wait, jitter included.
	retryFirstMax = time.Duration(float64(retryInitial) * (1 + retryJitter))
)

// NodeController registers a Node, keeps its Lease renewed and its status in
// step with a NodeProvider. Create it with New and start it with Run.
type NodeController struct {
	cfg       Config
	name      string
	clk       clock.Clock
	patchMeta strategicpatch.LookupPatchMeta

	metrics  Metrics
	defaults []corev1.NodeCondition

	latest atomic.Pointer[corev1.Node] // the provider's newest node
	ping   atomic.Pointer[pingState]   // the newest ping result, set by Run's loop
	notify chan struct{}               // capacity 1: "latest changed"

	started atomic.Bool
	ready   chan struct{}
	done    chan struct{}
	err     error // written before done is closed
}

// New checks cfg, fills its defaults and returns a controller. It has no
// side effects: nothing is sent to the API server before Run.
func New(cfg Config) (*NodeController, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	meta, err := nodePatchMeta()
	if err != nil {
		return nil, fmt.Errorf("nodestatus: node patch schema: %w", err)
	}
	c := &NodeController{
		cfg:       cfg,
		name:      cfg.Node.Name,
		clk:       cfg.Clock,
		patchMeta: meta,
		metrics:   cfg.Metrics,
		defaults:  cfg.DefaultConditions,
		notify:    make(chan struct{}, 1),
		ready:     make(chan struct{}),
		done:      make(chan struct{}),
	}
	if c.metrics == nil {
		c.metrics = noMetrics{}
	}
	c.latest.Store(cfg.Node)
	c.ping.Store(&pingState{})
	return c, nil
}

// Ready is closed once the Node is registered and its first heartbeat (lease
// renewal, or status write without leases) has succeeded. It is never closed
// if Run fails before that.
func (c *NodeController) Ready() <-chan struct{} { return c.ready }

// Done is closed when Run has returned.
func (c *NodeController) Done() <-chan struct{} { return c.done }

// Err returns Run's result once Done is closed, and nil before.
func (c *NodeController) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// notifyStatus is the callback handed to the provider: it never blocks.
func (c *NodeController) notifyStatus(n *corev1.Node) {
	if n == nil {
		return
	}
	n = n.DeepCopy()
	n.Name = c.name
	c.latest.Store(n)
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

func (c *NodeController) log(ctx context.Context) logr.Logger {
	return logr.FromContextOrDiscard(ctx)
}

func permanent(err error) error { return backoff.Permanent(err) }

// retry runs op with backoff until it succeeds or returns a permanent
// error. Failed requests have already been shown to the metrics hook and
// the error handler (see observe). A 429's Retry-After is honoured up to
// retryMaxWait.
func (c *NodeController) retry(ctx context.Context, name string, op func(context.Context) error) error {
	return backoff.Retry(ctx, func(ctx context.Context) error {
		err := op(ctx)
		if secs, ok := apierrors.SuggestsClientDelay(err); ok && apierrors.IsTooManyRequests(err) && !backoff.IsPermanent(err) {
			return backoff.RetryAfter(err, time.Duration(secs)*time.Second)
		}
		return err
	},
		backoff.WithClock(c.clk),
		backoff.WithInitialInterval(retryInitial),
		backoff.WithJitter(retryJitter),
		backoff.WithMaxInterval(retryMaxInterval),
		backoff.WithMaxRetryAfter(retryMaxWait),
		backoff.WithName("nodestatus "+name),
	)
}

func jitter(d time.Duration, lo, hi float64) time.Duration {
	return time.Duration(float64(d) * (lo + rand.Float64()*(hi-lo)))
}

func resetTimer(t clock.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C():
		default:
		}
	}
	t.Reset(d)
}

func stopTimer(t clock.Timer) {
	if !t.Stop() {
		select {
		case <-t.C():
		default:
		}
	}
}

// loopState is owned by Run's goroutine.
type loopState struct {
	server     *heldNode
	registered bool
	lease      *coordinationv1.Lease
	leaseOff   bool // heartbeats are status writes (disabled or unsupported)
	lastRenew  time.Time

	leaseBusy, statusBusy, pingBusy bool
	leaseAwaitsNode                 bool // renew once the Node was checked

	statusDirty, heartbeatDue, refetch bool

	ping        pingState
	pingStart   time.Time
	pingTimeout bool
	pingCancel  context.CancelFunc
	// pingStarted is set by the ping goroutine as it calls Ping: the
	// timeout measures the provider's ping, not the scheduler's delay in
	// starting the goroutine.
	pingStarted *atomic.Bool
}

// Run registers the Node, then renews its lease and writes its status until
// ctx ends. It blocks until every goroutine it started has returned (Ping
// must honour its context), then performs Config.OnShutdown, and returns
// ctx.Err(). It returns early with a wrapped error when the ErrorHandler
// gives up, or when the Node was deleted and Config.ReRegister is off
// (ErrNodeDeleted). A status the API server rejects does not stop it (see
// ErrRejected). Run may be called once.
func (c *NodeController) Run(ctx context.Context) (err error) {
	if !c.started.CompareAndSwap(false, true) {
		return ErrAlreadyStarted
	}
	defer func() {
		c.err = err
		close(c.done)
	}()
	log := c.log(ctx).WithValues("node", c.name)
	ctx = logr.NewContext(ctx, log)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()

	c.cfg.Provider.NotifyNodeStatus(wctx, c.notifyStatus)

	var wg sync.WaitGroup
	leaseDone := make(chan leaseResult, 1)
	statusDone := make(chan statusResult, 1)
	pingDone := make(chan error, 1)

	leaseT := c.clk.NewTimer(time.Hour)
	stopTimer(leaseT)
	reportT := c.clk.NewTimer(time.Hour)
	stopTimer(reportT)
	pingT := c.clk.NewTimer(time.Hour)
	defer func() {
		leaseT.Stop()
		reportT.Stop()
		pingT.Stop()
	}()

	st := loopState{leaseOff: c.cfg.DisableLease, statusDirty: true, heartbeatDue: true}
	renew := func() time.Duration { return jitter(c.cfg.RenewInterval, 1, 1+c.cfg.RenewJitter) }
	heartbeatsStopped := func() bool {
		return st.ping.failing && c.cfg.PingFailure == PingFailureStopHeartbeat
	}
	markReady := func() {
		select {
		case <-c.ready:
		default:
			if st.registered && (st.leaseOff || !st.lastRenew.IsZero()) {
				log.V(1).Info("Node is ready")
				close(c.ready)
			}
		}
	}
	startLease := func() {
		if st.leaseBusy || st.leaseOff || st.server == nil || heartbeatsStopped() {
			return
		}
		st.leaseBusy = true
		job := leaseJob{held: st.lease, owner: st.server.uid}
		wg.Go(func() { leaseDone <- c.renewLease(wctx, job) })
	}
	startStatus := func() {
		if st.statusBusy || !st.statusDirty {
			return
		}
		job := statusJob{
			heartbeat:   st.heartbeatDue && !heartbeatsStopped(),
			noHeartbeat: heartbeatsStopped(),
			uncordon:    !st.registered,
			registered:  st.registered,
		}
		if !st.refetch {
			job.server = st.server.node()
		}
		st.statusBusy, st.statusDirty, st.heartbeatDue, st.refetch = true, false, false, false
		wg.Go(func() { statusDone <- c.syncStatus(wctx, job) })
	}

	startPing := func() {
		pctx, pcancel := context.WithCancel(wctx)
		started := new(atomic.Bool)
		st.pingBusy, st.pingStart, st.pingTimeout, st.pingCancel, st.pingStarted = true, c.clk.Now(), false, pcancel, started
		wg.Go(func() {
			started.Store(true)
			pingDone <- c.cfg.Provider.Ping(pctx)
		})
		resetTimer(pingT, c.cfg.PingTimeout)
	}
	// renewNow starts a renewal at once (a zero-length timer would wait for
	// a fake clock's next step); its result re-arms the timer.
	renewNow := func() {
		stopTimer(leaseT)
		if st.leaseBusy {
			return
		}
		startLease()
		if !st.leaseBusy {
			resetTimer(leaseT, renew())
		}
	}
	pingResult := func(perr error) {
		st.pingBusy = false
		st.pingCancel()
		ps := pingState{}
		if st.pingTimeout {
			ps = pingState{failing: true, message: fmt.Sprintf("ping did not return within %v", c.cfg.PingTimeout)}
		} else if perr != nil {
			ps = pingState{failing: true, message: truncate(perr.Error(), maxMessage)}
		}
		wasStopped := heartbeatsStopped()
		c.setPing(ctx, &st, ps)
		if wasStopped && !heartbeatsStopped() && st.registered && !st.leaseOff {
			renewNow() // heartbeats resume at once
		}
		resetTimer(pingT, max(0, c.cfg.PingInterval-c.clk.Since(st.pingStart)))
	}
	startPing()

	var fatal error
loop:
	for {
		startStatus()
		select {
		case <-ctx.Done():
			break loop

		case <-c.notify:
			st.statusDirty = true

		case <-pingT.C():
			if !st.pingBusy {
				startPing()
				break
			}
			select {
			case perr := <-pingDone: // finished just now: not a timeout
				pingResult(perr)
				continue
			default:
			}
			if !st.pingStarted.Load() {
				// The goroutine has not even begun (a starved scheduler,
				// or a fake clock stepped at once): time the ping itself.
				resetTimer(pingT, c.cfg.PingTimeout)
				break
			}
			if !st.pingTimeout {
				// The ping outlived its timeout: cancel it and report.
				st.pingTimeout = true
				st.pingCancel()
				c.setPing(ctx, &st, pingState{failing: true, message: fmt.Sprintf("ping did not return within %v", c.cfg.PingTimeout)})
			}
			resetTimer(pingT, c.cfg.PingInterval)

		case perr := <-pingDone:
			pingResult(perr)

		case <-leaseT.C():
			switch {
			case heartbeatsStopped():
				resetTimer(leaseT, renew())
			case st.leaseOff:
				st.statusDirty, st.heartbeatDue = true, true
				resetTimer(leaseT, renew())
			default:
				startLease()
			}

		case r := <-leaseDone:
			st.leaseBusy = false
			now := c.clk.Now()
			switch {
			case r.err != nil:
				fatal = r.err
				break loop
			case r.unsupported:
				log.Info("Falling back to status heartbeats", "reason", ErrLeaseUnsupported.Error())
				st.leaseOff, st.lease = true, nil
				st.statusDirty, st.heartbeatDue = true, true
				resetTimer(leaseT, renew())
			case r.gone:
				log.Info("Lease disappeared; checking the Node before creating it again")
				st.lease, st.leaseAwaitsNode = nil, true
				st.statusDirty, st.refetch = true, true
			case r.lease != nil:
				if r.failures > 0 {
					// Heartbeats failed for a while: the node lifecycle
					// controller may have marked the node Unknown meanwhile.
					// Read it back (from the apiserver's cache) and restore
					// what differs at once.
					log.Info("Heartbeats succeed again; checking the Node", "failedAttempts", r.failures)
					st.statusDirty, st.refetch = true, true
				}
				st.lease, st.lastRenew = slimLease(r.lease), now
				resetTimer(leaseT, renew())
				if r.recreated {
					log.Info("Lease was recreated; checking the Node")
					st.leaseAwaitsNode = true
					st.statusDirty, st.refetch = true, true
				}
			}
			markReady()

		case <-reportT.C():
			st.statusDirty, st.heartbeatDue = true, true

		case r := <-statusDone:
			st.statusBusy = false
			if r.err != nil {
				fatal = r.err
				break loop
			}
			if r.rejected != nil {
				log.Info("The provider's status was rejected by the API server; it is written again at the next change or report", "error", r.rejected.Error())
			}
			if r.server != nil {
				uidChanged := st.server != nil && st.server.uid != r.server.uid
				st.server = r.server
				if r.created && st.registered {
					log.Info("Node was deleted; registered it again", "uid", r.server.uid)
				}
				if uidChanged || st.leaseAwaitsNode || !st.registered {
					// A first renewal, or a new owner reference for the lease.
					st.leaseAwaitsNode = false
					if st.leaseOff {
						resetTimer(leaseT, renew())
					} else {
						renewNow()
					}
				}
			} else if st.leaseAwaitsNode && st.server != nil {
				st.leaseAwaitsNode = false
				renewNow()
			}
			if r.written {
				// The first report after registration is spread over half
				// the interval, so that nodes started together do not
				// report together; later ones follow the interval exactly.
				next := c.cfg.StatusReportInterval
				if !st.registered {
					next = jitter(c.cfg.StatusReportInterval, 0.5, 1)
				}
				resetTimer(reportT, next)
			}
			if st.server != nil && !st.registered {
				st.registered = true
				if !r.written {
					resetTimer(reportT, jitter(c.cfg.StatusReportInterval, 0.5, 1))
				}
			}
			markReady()
		}
	}

	cancel()
	wg.Wait()
	if fatal != nil {
		return fmt.Errorf("nodestatus: node %s: %w", c.name, fatal)
	}
	if st.registered && c.cfg.OnShutdown != ShutdownNone {
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.ShutdownTimeout)
		defer scancel()
		if err := c.shutdown(sctx, st.server.uid); err != nil {
			log.Error(err, "Shutdown action failed", "action", c.cfg.OnShutdown)
			return fmt.Errorf("nodestatus: node %s: shutdown: %w (after %w)", c.name, err, ctx.Err())
		}
	}
	return ctx.Err()
}

// heldNode is the served Node kept between status writes: only what later
// writes use (labels, annotations and status; not the spec, managed fields
// or owner references), encoded in one allocation rather than the few
// hundred small ones of a decoded Node, and decoded when a write needs it.
// Status patches are computed and compared on labels, annotations and
// status only.
type heldNode struct {
	uid types.UID
	raw []byte // nil if it could not be encoded: the next write reads the Node
}

func hold(n *corev1.Node) *heldNode {
	slim := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion,
			Labels: n.Labels, Annotations: n.Annotations,
		},
		Status: n.Status,
	}
	raw, err := json.Marshal(&slim)
	if err != nil {
		raw = nil
	}
	return &heldNode{uid: n.UID, raw: raw}
}

// node decodes the held copy; nil (read the Node again) if it cannot.
func (h *heldNode) node() *corev1.Node {
	if h == nil || h.raw == nil {
		return nil
	}
	n := &corev1.Node{}
	if err := json.Unmarshal(h.raw, n); err != nil {
		return nil
	}
	return n
}

// slimLease drops the managed fields from a held lease: an update without
// them leaves the server's as they are.
func slimLease(l *coordinationv1.Lease) *coordinationv1.Lease {
	l.ManagedFields = nil
	return l
}

func (c *NodeController) setPing(ctx context.Context, st *loopState, ps pingState) {
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
