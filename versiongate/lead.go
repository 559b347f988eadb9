package versiongate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	"github.com/reconkit/reconkit/backoff"
)

// campaignWhileNewest follows the releases summary and campaigns while the
// local release is the newest, stopping (and resigning) when it is not.
func (g *Gate) campaignWhileNewest(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	w := g.releases.Watch()
	defer w.Close()

	var stop func()
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	first := true
	for {
		r, err := w.Get(ctx)
		if err != nil {
			return err
		}
		newest := !g.cfg.Version.Release.Less(r.Max)
		switch {
		case newest && stop == nil:
			log.Info("This node has the newest release, campaigning", "release", g.cfg.Version.Release.String())
			cctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				g.campaign(cctx)
			}()
			stop = func() { cancel(); <-done }
		case !newest && stop != nil:
			log.Info("A newer release joined, no longer campaigning", "release", g.cfg.Version.Release.String(), "newest", r.Max.String())
			stop()
			stop = nil
		case !newest && first:
			log.Info("This node does not have the newest release, not campaigning", "release", g.cfg.Version.Release.String(), "newest", r.Max.String())
		}
		first = false
	}
}

// campaign campaigns, leads, resigns, and campaigns again until ctx ends.
// Failures of either step are retried with backoff, and every term is
// followed by a pause before the next campaign.
func (g *Gate) campaign(ctx context.Context) {
	log := logr.FromContextOrDiscard(ctx)
	defer g.setPhase(PhaseIdle)
	failures := 0
	for {
		g.setPhase(PhaseCampaigning)
		term, release, err := g.campaignOnce(ctx)
		if err != nil {
			return // ctx ended
		}
		log.Info("Elected reconciler", "token", term.Token())
		g.setLeading(true)
		reachedDone, err := g.leadTerm(ctx, term)
		// lead, and the reconcile it runs, have returned: only now is the
		// term released.
		g.setLeading(false)
		// Not leading any more: the phase says so at once, not only when
		// the next campaign starts after a pause.
		g.setPhase(PhaseCampaigning)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		if rerr := term.Resign(rctx); rerr != nil {
			log.Info("Could not resign; the term will expire", "err", rerr.Error())
		}
		cancel()
		release()
		if ctx.Err() != nil {
			return
		}
		if err != nil && !reachedDone {
			// A term that failed before the status was done: pause before
			// campaigning again so a persistent failure does not spin.
			failures++
			pause := min(pauseBase<<min(failures-1, 10), pauseMax)
			log.Error(err, "Reconciler term failed, campaigning again", "after", pause.String())
			select {
			case <-g.clock.After(pause):
			case <-ctx.Done():
				return
			}
		} else {
			// A term that ended after the status was done (resigned or
			// lost): pause too, briefly, so that an election that ends
			// every term at once does not make a term loop.
			failures = 0
			log.Info("Reconciler term ended, campaigning again", "reason", fmt.Sprint(err), "after", pauseBase.String())
			select {
			case <-g.clock.After(pauseBase):
			case <-ctx.Done():
				return
			}
		}
	}
}

// campaignOnce campaigns, retrying failures, until it wins or ctx ends.
// Campaign gets a context that ends with ctx only while it waits: once it
// returned a term, that context lives until the caller calls release,
// after Resign, so that a Candidate whose terms end with their Campaign
// context cannot release while the gate's reconcile runs.
func (g *Gate) campaignOnce(ctx context.Context) (Term, func(), error) {
	var term Term
	var release func()
	err := backoff.Retry(ctx, func(ctx context.Context) error {
		wctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
		stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
		t, err := g.cfg.Candidate.Campaign(wctx)
		if err == nil && t == nil {
			err = errNoTerm
		}
		if !stop() || err != nil {
			// ctx ended while Campaign returned, or it failed: a term won
			// at that instant is given back, after nothing ran in it.
			if err == nil {
				rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
				_ = t.Resign(rctx)
				rcancel()
			}
			cancel(nil)
			if err == nil {
				err = ctx.Err()
			}
			return err
		}
		term, release = t, func() { cancel(nil) }
		return nil
	}, backoff.WithClock(g.clock), backoff.WithRand(g.rand.lead), backoff.WithName("versiongate: campaign"))
	if err != nil {
		return nil, nil, err
	}
	return term, release, nil
}

// errNoTerm is the failure of a Campaign that returned neither a term nor
// an error; it is retried with backoff.
var errNoTerm = errors.New("versiongate: Campaign returned no term and no error")

// Pause between failed terms: pauseBase doubling up to pauseMax.
const (
	pauseBase = 100 * time.Millisecond
	pauseMax  = 30 * time.Second
)

// leadTerm runs lead in a context that ends with the term or with ctx.
func (g *Gate) leadTerm(ctx context.Context, term Term) (reachedDone bool, err error) {
	lctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(term.Context(), func() { cancel(ErrLeadershipLost) })
	defer stop()
	err = g.lead(lctx, term, &reachedDone)
	if cause := context.Cause(lctx); cause != nil && errors.Is(cause, ErrLeadershipLost) {
		err = cause
	}
	return reachedDone, err
}

// statusGoneError ends one pass of the leader's work when the status was
// deleted, or changed, under the term: lead starts over, fencing again
// with the same term.
type statusGoneError struct{ err error }

func (e *statusGoneError) Error() string {
	return "the status changed under this term: " + e.err.Error()
}
func (e *statusGoneError) Unwrap() error { return e.err }

// statusGone wraps err in a *statusGoneError if it says the status is
// being deleted, and returns it unchanged otherwise.
func statusGone(err error) error {
	if errors.Is(err, ErrStatusDeleted) {
		return &statusGoneError{err: err}
	}
	return err
}

// lead is the leader's work for one term; it returns when ctx ends or on
// an error. The status deleted (or changed) under the term, which a pass
// learns from the store's ErrStatusDeleted or from the read-back of each
// periodic reconcile, starts the work over within the term: Fence again
// with the same token (which finishes a deletion the store holds, so that
// waiting nodes are not left behind a status only the next term would
// recover), then the status read anew and the rule for what it holds.
// Passes that start over are paced by the readiness wait's backoff, reset
// once a pass has kept the status for a reconcile interval, so an
// operator deleting the status in a loop cannot make the leader spin.
func (g *Gate) lead(ctx context.Context, term Term, reachedDone *bool) error {
	log := logr.FromContextOrDiscard(ctx)
	for {
		// Each attempt is a pass; a pass that ends with the status gone
		// fails the attempt, so the next starts after a pause that grows
		// while passes keep failing so. A pass that kept the status for
		// a reconcile interval first succeeds the attempt instead, and the
		// sequence starts again.
		var result error
		err := backoff.Retry(ctx, func(ctx context.Context) error {
			var kept bool
			result = g.leadPass(ctx, term, reachedDone, &kept)
			var gone *statusGoneError
			if !errors.As(result, &gone) || ctx.Err() != nil {
				return nil
			}
			log.Error(gone.err, "The status was deleted or changed during this term; fencing again with this term's token and reconciling from the status as read anew", "token", term.Token())
			if kept {
				return nil
			}
			return gone
		}, backoff.WithClock(g.clock), backoff.WithRand(g.rand.lead), backoff.WithName("versiongate: lead"),
			backoff.WithInitialInterval(readRetryBase), backoff.WithMaxInterval(readRetryMax),
			backoff.WithMultiplier(readRetryMultiplier), backoff.WithJitter(readRetryJitter))
		var gone *statusGoneError
		switch {
		case err != nil: // the context ended during a pause between passes
			return err
		case result == nil || ctx.Err() != nil || !errors.As(result, &gone):
			return result
		}
	}
}

// leadPass is one pass of the leader's work: fence, read, reconcile,
// write the status, then reconcile periodically, reading the status back
// each time. It returns a *statusGoneError when the status was deleted or
// changed under the term; kept says the status stood for at least one
// periodic read-back before that.
func (g *Gate) leadPass(ctx context.Context, term Term, reachedDone, kept *bool) error {
	log := logr.FromContextOrDiscard(ctx)
	st := g.cfg.Store
	target := Status{State: StateDone, Version: g.cfg.Version, MinimumCompatibleRelease: g.cfg.MinimumCompatibleRelease}

	// Fence first, then read: every write of an earlier term that lands
	// after the fence is refused, and every one before it is in the read.
	// A status being deleted that the store cannot recover yet (another
	// controller's finalizer, a namespace being deleted) is retried with
	// the backoff as any failure is.
	if err := backoff.Retry(ctx, func(ctx context.Context) error {
		err := st.Fence(ctx, term)
		if errors.Is(err, ErrLeadershipLost) {
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithClock(g.clock), backoff.WithRand(g.rand.lead), backoff.WithName("versiongate: fence")); err != nil {
		if errors.Is(err, ErrLeadershipLost) && term.Context().Err() == nil {
			// The term is live, yet the fence is ahead of it: never go
			// silent about a fence that may need an operator.
			g.reportFencedOff(ctx, term, err)
		}
		return fmt.Errorf("fence: %w", err)
	}
	g.fencedOff.Store(nil)
	var stored StoredStatus
	if err := backoff.Retry(ctx, func(ctx context.Context) error {
		var err error
		stored, err = st.ReadStatus(ctx)
		if errors.Is(err, ErrStatusDeleted) {
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithClock(g.clock), backoff.WithRand(g.rand.lead), backoff.WithName("versiongate: read status")); err != nil {
		return statusGone(fmt.Errorf("read status: %w", err))
	}
	var current *Status
	existed := stored.exists()
	if existed {
		cur, err := stored.decode()
		g.setStatusError(err)
		if err != nil {
			log.Error(err, "Stored status is corrupt; treating it as absent")
		} else {
			current = &cur
		}
	} else {
		g.setStatusError(nil)
	}

	switch action := Decide(current, target); action {
	case ActionCreate:
		// No status, or none that decodes: a first boot, or a status
		// deleted or damaged under nodes that passed WaitReady on it and
		// still serve. The leader cannot tell which, so it reconciles only
		// once no node below its minimum compatible release has a record,
		// and writes the status conditioned on the records (below).
		log.Info("No valid status; reconciling once no incompatible node has a record, then creating it")
		if err := g.waitStatusMissing(ctx, existed, !existed && stored.FirstBoot); err != nil {
			return err
		}
	case ActionLeave:
		log.Info("Status is already up to date", "status", current.String())
	case ActionSetWorking:
		log.Info("Status is compatible, setting state to working", "status", current.String())
		if current.State != StateWorking {
			working := *current
			working.State = StateWorking
			if err := g.putGuarded(ctx, term, working); err != nil {
				return err
			}
		}
	case ActionRestrict:
		restricted := Restricted(*current, target)
		log.Info("Status admits incompatible releases; restricting before reconciling", "status", current.String(), "restricted", restricted.String())
		g.setPhase(PhaseRestricting)
		g.event("Normal", ReasonRestricting, fmt.Sprintf("Leader %s at %s restricts the status from %s to %s; waiting for incompatible nodes to go", g.cfg.NodeID, g.cfg.Version, current, restricted))
		if err := g.restrict(ctx, term, restricted); err != nil {
			return err
		}
		g.event("Normal", ReasonRestricted, fmt.Sprintf("Leader %s wrote the restricted status %s", g.cfg.NodeID, restricted))
		g.observe(Observation{Event: EventRestrict, Token: term.Token()})
	}

	if existed && g.cfg.SettleTime > 0 {
		// An earlier reconciler ran: give its requests still in flight
		// time to land. Best effort; the periodic reconcile repairs what
		// a late request undoes.
		g.setPhase(PhaseSettling)
		log.Info("Waiting for an earlier reconciler's requests to settle", "settle", g.cfg.SettleTime.String())
		select {
		case <-g.clock.After(g.cfg.SettleTime):
		case <-ctx.Done():
			return ctx.Err()
		}
	}

	g.setPhase(PhaseReconciling)
	log.Info("Performing initial reconcile")
	reconcile := func(ctx context.Context) error { return g.cfg.Reconcile(ctx, term) }
	if err := backoff.Retry(ctx, reconcile, backoff.WithClock(g.clock), backoff.WithRand(g.rand.lead), backoff.WithName("versiongate: initial reconcile")); err != nil {
		return fmt.Errorf("initial reconcile: %w", err)
	}
	log.Info("Initial reconcile succeeded")

	switch {
	case current == nil:
		// Conditioned on the records, as the restricted status is: a node
		// below the minimum compatible release that published a record
		// since the summary this leader acted on makes the write fail, and
		// the leader waits for it to go.
		if err := g.restrict(ctx, term, target); err != nil {
			return err
		}
	case *current != target:
		if err := g.putGuarded(ctx, term, target); err != nil {
			return err
		}
	}
	*reachedDone = true
	// The event and the observation go out before the phase changes, so
	// that a host that sees PhaseDone has already been told of it.
	g.event("Normal", ReasonUpgradeDone, fmt.Sprintf("Leader %s reconciled at %s; status %s", g.cfg.NodeID, g.cfg.Version, target))
	g.observe(Observation{Event: EventDone, Token: term.Token()})
	g.setPhase(PhaseDone)

	// Each periodic reconcile first reads the status back (one read per
	// interval): a status deleted or changed under the term ends the pass,
	// and lead starts over, instead of leaving nodes to wait for the next
	// term.
	periodic := func(ctx context.Context) error {
		if err := g.readBack(ctx, target); err != nil {
			return backoff.Permanent(err)
		}
		*kept = true
		return reconcile(ctx)
	}
	err := backoff.Every(ctx, g.cfg.ReconcileInterval, g.cfg.ReconcileJitter, periodic,
		backoff.WithClock(g.clock), backoff.WithRand(g.rand.lead), backoff.WithDelayedStart(), backoff.WithName("versiongate: periodic reconcile"))
	var gone *statusGoneError
	if errors.As(err, &gone) {
		return gone
	}
	return err
}

// readBack reads the status, as the leader's periodic reconcile does
// before reconciling: it returns a *statusGoneError if the status is
// being deleted, absent, or not the target this term wrote, and nil
// otherwise, a failed read included (the next period reads again, and
// the reconcile goes on meanwhile).
func (g *Gate) readBack(ctx context.Context, target Status) error {
	stored, err := g.cfg.Store.ReadStatus(ctx)
	if errors.Is(err, ErrStatusDeleted) {
		return &statusGoneError{err: err}
	}
	if err != nil {
		logr.FromContextOrDiscard(ctx).Info("Could not read the status back; reading it again at the next reconcile", "err", err.Error())
		return nil
	}
	if !stored.exists() {
		return &statusGoneError{err: errors.New("the status is missing")}
	}
	cur, err := stored.decode()
	if err != nil {
		return &statusGoneError{err: err}
	}
	if cur != target {
		return &statusGoneError{err: fmt.Errorf("the status holds %s, not %s as this term wrote", cur, target)}
	}
	return nil
}

// putGuarded writes st fenced by the term, retrying failures other than a
// lost term.
func (g *Gate) putGuarded(ctx context.Context, term Term, st Status) error {
	b, err := st.Encode()
	if err != nil {
		return err
	}
	err = backoff.Retry(ctx, func(ctx context.Context) error {
		err := g.cfg.Store.WriteStatus(ctx, term, b, 0)
		if errors.Is(err, ErrLeadershipLost) || errors.Is(err, ErrStatusDeleted) {
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithClock(g.clock), backoff.WithRand(g.rand.lead), backoff.WithName("versiongate: write status"))
	if err != nil {
		return statusGone(fmt.Errorf("write status: %w", err))
	}
	logr.FromContextOrDiscard(ctx).Info("Wrote status", "status", st.String())
	return nil
}

// restrict waits until no member node is below the restricted status'
// minimum compatible release, then writes it fenced by the term and
// conditioned on no node record having changed since the summary that
// showed no such node; it retries on every new summary until that
// succeeds. It writes the first status after a missing one the same way.
func (g *Gate) restrict(ctx context.Context, term Term, restricted Status) error {
	log := logr.FromContextOrDiscard(ctx)
	b, err := restricted.Encode()
	if err != nil {
		return err
	}
	need := restricted.MinimumCompatibleRelease
	var lastLogged *Release
	// Each attempt follows the summaries from the newest, and writes on
	// the first that shows no incompatible node. A transient failure of
	// the write fails the attempt: the next comes after a pause that grows
	// while it persists, as WaitReady's do.
	err = backoff.Retry(ctx, func(ctx context.Context) error {
		w := g.releases.Watch()
		defer w.Close()
		for {
			r, err := w.Get(ctx)
			if err != nil {
				return backoff.Permanent(err)
			}
			if g.cfg.Version.Release.Less(r.Max) {
				// A newer node joined; campaignWhileNewest will end this term.
				continue
			}
			if r.Min.Less(need) {
				if lastLogged == nil || *lastLogged != r.Min {
					m := r.Min
					lastLogged = &m
					log.Info("Incompatible nodes exist, waiting for them to go", "minimumNodeRelease", r.Min.String(), "need", need.String(), "blocking", fmt.Sprint(g.Blocking()))
				}
				continue
			}
			err = g.cfg.Store.WriteStatus(ctx, term, b, r.Revision)
			switch {
			case err == nil:
				log.Info("Wrote status conditioned on the node records", "status", restricted.String(), "nodesRevision", r.Revision)
				return nil
			case errors.Is(err, ErrLeadershipLost):
				return backoff.Permanent(fmt.Errorf("restricted status: %w", err))
			case errors.Is(err, ErrStatusDeleted):
				return backoff.Permanent(&statusGoneError{err: fmt.Errorf("restricted status: %w", err)})
			case errors.Is(err, ErrNodesChanged):
				// The watcher will publish the change.
				log.Info("Nodes changed since the last summary; retrying the restricted status write")
			default:
				log.Info("Could not write the restricted status, retrying", "err", err.Error())
				return fmt.Errorf("restricted status: %w", err)
			}
		}
	}, backoff.WithClock(g.clock), backoff.WithRand(g.rand.lead), backoff.WithName("versiongate: restricted status write"),
		backoff.WithInitialInterval(readRetryBase), backoff.WithMaxInterval(readRetryMax),
		backoff.WithMultiplier(readRetryMultiplier), backoff.WithJitter(readRetryJitter))
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// waitStatusMissing is the leader's answer to a status that is absent
// (existed false) or does not decode: when other nodes have records it
// warns that the status may have been deleted or damaged under serving
// nodes (at info level only, without the warning, when the store proves
// a first boot), and it returns only once no member node is below the
// local minimum compatible release, so that the reconcile that follows
// breaks no node that may be serving.
func (g *Gate) waitStatusMissing(ctx context.Context, existed, firstBoot bool) error {
	log := logr.FromContextOrDiscard(ctx)
	need := g.cfg.MinimumCompatibleRelease
	r, _ := g.releases.Load()
	blocking := g.Blocking()
	what := "no status"
	if existed {
		what = "a corrupt status"
	}
	switch {
	case firstBoot:
		log.Info("No status was ever written (the store proves none was deleted): a first boot", "nodes", r.Nodes, "blocking", blocking)
	case r.Nodes > 1 || len(blocking) > 0:
		msg := fmt.Sprintf("Leader %s found %s while %d node records exist: if the status was deleted or damaged, nodes may still serve on the state it admitted", g.cfg.NodeID, what, r.Nodes)
		if len(blocking) > 0 {
			msg += fmt.Sprintf("; it reconciles only once no node below %s has a record (blocking: %v)", need, blocking)
		}
		log.Error(nil, msg)
		g.event("Warning", ReasonStatusMissing, msg)
	}
	if len(blocking) == 0 && !r.Min.Less(need) {
		return nil
	}
	g.setPhase(PhaseRestricting)
	w := g.releases.Watch()
	defer w.Close()
	for {
		r, err := w.Get(ctx)
		if err != nil {
			return err
		}
		if !r.Min.Less(need) {
			return nil
		}
	}
}

// reportFencedOff reports a fence ahead of a live term: with an error log
// and a FencedOff warning the first time, and at info level only while the
// same fence keeps holding the same token, however many terms it refuses.
// A Fence that succeeds ends the episode, so a later one is reported anew.
func (g *Gate) reportFencedOff(ctx context.Context, term Term, err error) {
	log := logr.FromContextOrDiscard(ctx)
	key := err.Error()
	msg := fmt.Sprintf("Leader %s cannot reconcile: %v", g.cfg.NodeID, err)
	var fe *FencedOffError
	if errors.As(err, &fe) {
		key = fmt.Sprintf("%s\x00%d", fe.Fence, fe.Stored)
	} else {
		msg += "; if no later leader exists, tokens went back (a Lease recreated by an old client, a restored backup) and the store's fence must be cleared"
	}
	if prev := g.fencedOff.Swap(&key); prev != nil && *prev == key {
		log.Info("The store's fence is still ahead of this live term; reported already", "token", term.Token(), "err", err.Error())
		return
	}
	log.Error(err, "The store's fence is ahead of this live term; if no later leader exists, tokens went back and the fence must be cleared", "token", term.Token())
	g.event("Warning", ReasonFencedOff, msg)
}
