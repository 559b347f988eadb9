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
	rejected error    // the newest desired status was refused for good during the job (by a status patch or a registration); what was written is reduced
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
	s := &statusSync{
		c: c, job: job,
		server: job.server.unpack(), // decoded here: deep decoding would grow the loop's stack
		fresh:  job.fresh,
	}
	s.res.refused = job.refused
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
		err := s.attempt(ctx)
		if err != nil && s.stale && !s.readFresh && !isPermanent(err) {
			// A stale copy or a vanished Node: read it again at once.
			// Not when the attempt read it linearizably itself: the
			// server disagrees with its own newest copy (another writer
			// at every turn, or a server that answers 409 to
			// everything), and only the backoff bounds what that costs.
			s.res.failures++
			err = s.attempt(ctx)
		}
		if err != nil && !isPermanent(err) {
			s.res.failures++
		}
		return err
	})
	if err != nil && ctx.Err() == nil {
		s.res.err = err
	}
	if s.got != nil {
		s.res.server = packNode(s.got, false)
	}
	return s.res
}

// statusSync is one status job at work, across its attempts: the copy of
// the Node it writes against and what it reports to the loop.
type statusSync struct {
	c      *NodeController
	job    statusJob
	res    statusResult
	server *corev1.Node // the copy the next write is computed against; nil to read it
	got    *corev1.Node // the newest copy the server answered, reported to the loop
	fresh  bool         // read the Node linearizably rather than from the apiserver's cache
	stale  bool         // the attempt found its copy outdated: read it again at once
	// readFresh is set when the attempt read the Node linearizably
	// itself: a copy it finds outdated is not read again at once.
	readFresh bool
}

// reread drops the copy: the next attempt reads the Node linearizably.
func (s *statusSync) reread() { s.server, s.fresh, s.stale = nil, true, true }

// took records a copy the server answered with.
func (s *statusSync) took(n *corev1.Node) { s.server, s.got = n, n }

// attempt reads or registers the Node if needed, undoes the shutdown
// cordon if due, and writes the status.
func (s *statusSync) attempt(ctx context.Context) error {
	c := s.c
	s.stale, s.readFresh = false, false
	rctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	src, ping := c.latest.Load(), *c.ping.Load()
	want := c.want(src, ping)
	if s.server == nil {
		s.readFresh = s.fresh
		if err := s.read(ctx, rctx, want, src, ping); err != nil {
			return err
		}
	}
	if s.job.uncordon {
		if err := s.undoCordon(ctx, rctx); err != nil {
			return err
		}
	}
	return s.write(ctx, rctx, want, src, ping)
}

// read reads the Node, or registers it when it is missing.
func (s *statusSync) read(ctx, rctx context.Context, want *corev1.Node, src *packedNode, ping pingState) error {
	n, created, err := s.getOrCreate(ctx, rctx, want, src, ping)
	if apierrors.IsAlreadyExists(err) {
		s.fresh, s.stale = true, true // registered meanwhile: adopt it
	}
	if err != nil {
		return err
	}
	s.took(n)
	if created {
		s.res.written, s.res.created = true, true
		s.job.uncordon = false
		// Go on: the create may have dropped parts of the status,
		// which the patch then writes.
	}
	return nil
}

// undoCordon undoes this controller's own shutdown cordon.
func (s *statusSync) undoCordon(ctx, rctx context.Context) error {
	c := s.c
	n, err := c.uncordon(ctx, rctx, s.server)
	if errors.Is(err, ErrRejected) && !isStop(err) {
		c.log(ctx).Info("Cannot undo the shutdown cordon", "error", err.Error())
		n, err = nil, nil
	}
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			s.reread()
		}
		return err
	}
	if n != nil {
		s.took(n)
		s.res.written = true
	}
	s.job.uncordon = false
	return nil
}

// write patches the status towards want, computed from the provider's
// node src and the ping result ping, falling back to reduced levels when
// the API server refuses a level for good, and starting at the level a
// refusal of src left.
func (s *statusSync) write(ctx, rctx context.Context, want *corev1.Node, src *packedNode, ping pingState) error {
	c := s.c
	now := c.clk.Now()
	rec, recErr := serverRecord(s.server)
	if recErr != nil {
		c.log(ctx).Info("Ignoring the unreadable last-applied annotation; nothing of it will be deleted", "error", recErr.Error())
	}
	refuse := func(level patchLevel) { s.refuse(src, ping, level) }
	first, ok := s.res.refused.start(src, ping)
	if !ok {
		return nil // refused as it is: wait for a change
	}
	for level := first; level <= levelConditions; level++ {
		d := reduce(want, rec, level)
		p, err := c.patchFor(d, s.server, rec, now, s.job)
		if errors.Is(err, errRecordTooLarge) {
			if s.res.rejected, err = c.rejectLocal(ctx, err); err != nil {
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
				s.res.refused, s.res.rejected = nil, nil
			}
			return nil
		}
		start := c.clk.Now()
		n, err := c.cfg.Client.CoreV1().Nodes().Patch(rctx, c.name, types.StrategicMergePatchType, p, metav1.PatchOptions{FieldManager: c.cfg.FieldManager}, "status")
		err = c.observe(ctx, CallPatchStatus, start, err)
		switch {
		case err == nil:
			s.took(n)
			s.res.written = true
			if level == levelFull {
				s.res.refused, s.res.rejected = nil, nil
			} else if s.res.rejected != nil {
				c.log(ctx).Info("Wrote a reduced status; the provider's full status was rejected", "written", level.String(), "error", s.res.rejected.Error())
			}
			return nil
		case errors.Is(err, ErrRejected) && !isStop(err):
			s.res.rejected = err
			refuse(level)
			continue
		case apierrors.IsConflict(err):
			s.reread()
			return fmt.Errorf("patch node status: stale copy: %w", err)
		case apierrors.IsNotFound(err):
			s.reread()
			return fmt.Errorf("patch node status: %w", err)
		}
		return fmt.Errorf("patch node status: %w", err)
	}
	// Even the conditions alone were refused: nothing more to try until
	// the provider's status or the ping result changes.
	c.log(ctx).Info("The API server rejected every form of the status; waiting for the next change", "error", s.res.rejected.Error())
	return nil
}

// refuse records that the API server refused src with ping, written at
// level, for good: later writes and registrations start past it.
func (s *statusSync) refuse(src *packedNode, ping pingState, level patchLevel) {
	if src.raw != nil {
		s.res.refused = &refusal{src: src.raw, level: level + 1, ping: ping}
	}
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
