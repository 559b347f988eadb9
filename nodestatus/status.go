package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/reconkit/reconkit/backoff"
)

// statusJob is one status write as the loop hands it to a worker: every
// field is owned by the worker until it reports back. The desired status is
// not part of it: each attempt computes it from the provider's newest.
type statusJob struct {
	refused     *refusal    // what the API server refused for good, nil if nothing
	server      *packedNode // last server copy, nil to GET first
	fresh       bool        // GET it linearizably, not from the apiserver's cache
	heartbeat   bool        // stamp heartbeat times with now
	noHeartbeat bool        // never stamp them (heartbeats are stopped)
	uncordon    bool        // undo our own shutdown cordon
	registered  bool        // the Node was registered before: a 404 means deleted
	limited     bool        // holds a unit of Config.Limiter for its first attempt
}

type statusResult struct {
	server   *packedNode // new server copy (nil if unchanged), encoded on the worker
	written  bool        // a write reached the server
	created  bool
	rejected error    // the newest desired status was refused for good; what was written is reduced
	refused  *refusal // the refusal the next job starts from
	failures int      // attempts that failed before the job ended
	err      error    // fatal: Run stops
}

// ErrNodeDeleted is wrapped by Run's error when the Node was deleted by
// someone else and Config.ReRegister is off.
var ErrNodeDeleted = errors.New("nodestatus: node was deleted")

// syncStatus registers, adopts or patches the Node, retrying transient
// failures with backoff until it succeeds, the error handler gives up, or
// ctx ends. Each attempt starts from the provider's newest status, so a
// correction is never held up behind a failing write.
func (c *NodeController) syncStatus(ctx context.Context, job statusJob) statusResult {
	var res statusResult
	var got *corev1.Node          // the newest server copy this job received
	server := job.server.unpack() // decoded here: deep decoding would grow the loop's stack
	fresh := job.fresh            // read from storage rather than the apiserver's cache
	stale := false                // the attempt found its copy outdated
	res.refused = job.refused
	attempt := func(ctx context.Context) error {
		stale = false
		rctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
		defer cancel()
		src, ping := c.latest.Load(), *c.ping.Load()
		want := c.want(src, ping)
		refuse := func(level patchLevel) {
			if src.raw != nil {
				res.refused = &refusal{src: src.raw, level: level + 1, ping: ping}
			}
		}
		if server == nil {
			n, created, err := c.getOrCreate(ctx, rctx, want, job, fresh)
			if apierrors.IsAlreadyExists(err) {
				fresh, stale = true, true // registered meanwhile: adopt it
			}
			if err != nil {
				return err
			}
			server, got = n, n
			if created {
				res.written, res.created = true, true
				job.uncordon = false
				// Go on: the create may have dropped parts of the
				// status, which the patch below then writes.
			}
		}
		if job.uncordon {
			n, err := c.uncordon(ctx, rctx, server)
			if errors.Is(err, ErrRejected) && !isStop(err) {
				c.log(ctx).Info("Cannot undo the shutdown cordon", "error", err.Error())
				n, err = nil, nil
			}
			if err != nil {
				if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
					server, fresh, stale = nil, true, true
				}
				return err
			}
			if n != nil {
				server, got, res.written = n, n, true
			}
			job.uncordon = false
		}
		now := c.clk.Now()
		rec, recErr := serverRecord(server)
		if recErr != nil {
			c.log(ctx).Info("Ignoring the unreadable last-applied annotation; nothing of it will be deleted", "error", recErr.Error())
		}
		res.rejected = nil
		first, ok := res.refused.start(src, ping)
		if !ok {
			return nil // refused as it is: wait for a change
		}
		for level := first; level <= levelConditions; level++ {
			d := reduce(want, rec, level)
			p, err := c.patchFor(d, server, rec, now, job)
			if errors.Is(err, errRecordTooLarge) {
				if res.rejected, err = c.rejectLocal(ctx, err); err != nil {
					return err
				}
				refuse(level)
				continue
			}
			if err != nil {
				return permanent(err)
			}
			if p == nil {
				if level == levelFull {
					res.refused = nil
				}
				return nil
			}
			start := c.clk.Now()
			n, err := c.cfg.Client.CoreV1().Nodes().Patch(rctx, c.name, types.StrategicMergePatchType, p, metav1.PatchOptions{FieldManager: c.cfg.FieldManager}, "status")
			err = c.observe(ctx, CallPatchStatus, start, err)
			switch {
			case err == nil:
				server, got, res.written = n, n, true
				if level == levelFull {
					res.refused = nil
				} else if res.rejected != nil {
					c.log(ctx).Info("Wrote a reduced status; the provider's full status was rejected", "written", level.String(), "error", res.rejected.Error())
				}
				return nil
			case errors.Is(err, ErrRejected) && !isStop(err):
				res.rejected = err
				refuse(level)
				continue
			case apierrors.IsConflict(err):
				server, fresh, stale = nil, true, true
				return fmt.Errorf("patch node status: stale copy: %w", err)
			case apierrors.IsNotFound(err):
				server, fresh, stale = nil, true, true
				return fmt.Errorf("patch node status: %w", err)
			}
			return fmt.Errorf("patch node status: %w", err)
		}
		// Even the conditions alone were refused: nothing more to try
		// until the provider's status or the ping result changes.
		c.log(ctx).Info("The API server rejected every form of the status; waiting for the next change", "error", res.rejected.Error())
		return nil
	}
	hasUnit := job.limited
	defer func() {
		if hasUnit { // no attempt took the unit over
			c.cfg.Limiter.Release(1)
		}
	}()
	err := c.retry(ctx, retryStatus, func(ctx context.Context) error {
		if l := c.cfg.Limiter; l != nil {
			if hasUnit {
				hasUnit = false
			} else if err := l.Acquire(ctx, 1); err != nil {
				return err // ctx ended
			}
			defer l.Release(1)
		}
		err := attempt(ctx)
		if err != nil && stale && !isPermanent(err) {
			// A stale copy or a vanished Node: read it again at once.
			res.failures++
			err = attempt(ctx)
		}
		if err != nil && !isPermanent(err) {
			res.failures++
		}
		return err
	})
	if err != nil && ctx.Err() == nil {
		res.err = err
	}
	if got != nil {
		res.server = packNode(got, false)
	}
	return res
}

// patchFor stamps a copy of d against server and returns the patch (nil
// if nothing needs writing). Any real change is also a status report: its
// heartbeat times are refreshed.
func (c *NodeController) patchFor(d, server *corev1.Node, rec *lastApplied, now time.Time, job statusJob) ([]byte, error) {
	stamped := func(heartbeat bool) ([]byte, error) {
		x := d.DeepCopy()
		stampTimes(x, server, now, heartbeat)
		return statusPatch(c.patchMeta, x, server, rec)
	}
	p, err := stamped(job.heartbeat)
	if err == nil && p != nil && !job.heartbeat && !job.noHeartbeat {
		p, err = stamped(true)
	}
	return p, err
}

// rejectLocal reports a status the controller itself cannot write (its
// record would not fit in an annotation) like a rejection by the server.
// The second result stops Run when the ErrorHandler asks for it.
func (c *NodeController) rejectLocal(ctx context.Context, err error) (error, error) {
	err = fmt.Errorf("%w: %w", ErrRejected, err)
	if h := c.cfg.ErrorHandler; h != nil {
		if herr := h(ctx, err); herr != nil {
			return err, permanent(&stopError{err: herr})
		}
	}
	return err, nil
}

func isPermanent(err error) bool { return backoff.IsPermanent(err) }

func isStop(err error) bool {
	var s *stopError
	return errors.As(err, &s)
}
