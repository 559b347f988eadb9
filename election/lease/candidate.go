package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	coordinationv1beta1client "k8s.io/client-go/kubernetes/typed/coordination/v1beta1"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/internal/jitter"
)

// Coordinated makes a Elector take part in Coordinated Leader
// Election (KEP-4355, coordination.k8s.io/v1beta1, beta and off by default
// in Kubernetes 1.37: the apiserver needs
// --feature-gates=CoordinatedLeaderElection=true and
// --runtime-config=coordination.k8s.io/v1beta1=true). The candidate
// publishes a LeaseCandidate named by its Identity (which must therefore
// be a DNS subdomain), in the Lease's namespace, with its versions, and
// lets the apiserver's
// election controller pick the holder: with the OldestEmulationVersion
// strategy, the candidate with the lowest emulation version, then binary
// version, then the oldest LeaseCandidate. It never takes the Lease on
// its own, not even an expired one, with one exception below; it adopts
// it once the controller names it as holder, and yields when the
// controller names another preferred holder.
//
// It never adopts a term it did not take itself. A Lease naming this
// candidate's identity is adopted at once only when this process's watch
// saw the controller write it: a state that names the identity without an
// acquireTime, delivered right after a state that named another holder,
// none, or no Lease. Every candidate of ours writes an acquireTime when it
// takes a Lease, and a client-go candidate only renews a Lease that names
// it already, so only the controller writes such a state, and the
// acquiring write carries its resourceVersion, so nobody renewed it in
// between. Any other Lease naming this identity (with an acquireTime, or
// first seen by a read, or while a client-go candidate of the same name
// renews it) may record the term of a predecessor with the same name,
// ours or client-go's, alive but cut off: the candidate treats it as any
// other holder's and takes it, with a new transition, only once it has
// seen it unchanged for the lease duration (the controller never renames
// an expired Lease to the holder it already names). So a process
// restarted under its predecessor's pod name never believes it still
// holds its predecessor's term. The price: a naming seen only by a read
// (while the watch fails) is taken a lease duration later, 5s with the
// controller's.
//
// What this rests on, beyond the uncoordinated case: the controller judges
// expiry by comparing renewTime, written by the holder's clock, with its
// own clock, so the holder's and the apiserver's time of day must agree
// within LeaseDuration − RenewDeadline; and the controller counts a
// candidate as alive only if the renewTime it writes in its LeaseCandidate
// is after the controller's ping, so a candidate whose clock runs behind
// the apiserver's is never picked.
type Coordinated struct {
	// BinaryVersion is this candidate's release, a semantic version such
	// as "1.4.2". Required.
	BinaryVersion string
	// EmulationVersion is the version whose behaviour it emulates; empty
	// means BinaryVersion.
	EmulationVersion string
	// Strategy is the election strategy it asks for; empty means
	// coordinationv1.OldestEmulationVersion, the one the apiserver's
	// controller implements.
	Strategy coordinationv1.CoordinatedLeaseStrategy
}

// candidateRenewInterval is how often the LeaseCandidate is renewed even
// without a ping, client-go's requeue interval: the controller ignores
// candidates not renewed for 15 minutes.
const candidateRenewInterval = 5 * time.Minute

// validateCoordinated fills the defaults of c.Coordinated and checks it.
func (c *Config) validateCoordinated() error {
	co := c.Coordinated
	if co == nil {
		return nil
	}
	if strings.TrimSpace(co.BinaryVersion) == "" {
		return fmt.Errorf("%w: Coordinated.BinaryVersion is required", election.ErrInvalidConfig)
	}
	if co.EmulationVersion == "" {
		co.EmulationVersion = co.BinaryVersion
	}
	if co.Strategy == "" {
		co.Strategy = coordinationv1.OldestEmulationVersion
	}
	// The controller writes the LeaseCandidate's name as holderIdentity,
	// so the object is named by the identity, which must be a valid name.
	if errs := validation.IsDNS1123Subdomain(c.Identity); len(errs) > 0 {
		return fmt.Errorf("%w: with Coordinated, Identity %q names the LeaseCandidate and must be a DNS subdomain: %s", election.ErrInvalidConfig, c.Identity, strings.Join(errs, "; "))
	}
	return nil
}

// startCandidate starts, once, the goroutine that publishes and renews
// this candidate's LeaseCandidate until Close, which waits for it.
func (e *Elector) startCandidate(log logr.Logger) {
	if e.cfg.Coordinated == nil {
		return
	}
	e.candidateOnce.Do(func() {
		e.candidateWG.Add(1)
		go func() {
			defer e.candidateWG.Done()
			e.keepCandidate(e.ctx, log)
		}()
	})
}

// keepCandidate creates or renews the LeaseCandidate, then watches it and
// renews it when the election controller pings it (pingTime after
// renewTime), and at least every candidateRenewInterval, until ctx ends;
// then it deletes it.
func (e *Elector) keepCandidate(ctx context.Context, log logr.Logger) {
	cands := e.cfg.Client.CoordinationV1beta1().LeaseCandidates(e.cfg.Namespace)
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.RenewDeadline)
		defer cancel()
		if err := cands.Delete(dctx, e.cfg.Identity, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			log.V(1).Info("Deleting the LeaseCandidate failed; the apiserver collects it later", "err", err)
		}
	}()
	failures := 0 // failed renewals or watches in a row
	for ctx.Err() == nil {
		rv, err := e.renewCandidate(ctx, cands)
		if err == nil {
			err = e.awaitPing(ctx, cands, rv)
		}
		if err == nil {
			failures = 0
			continue
		}
		if ctx.Err() != nil {
			return
		}
		failures++
		wait := candidateRetryWait(failures, e.cfg.RetryPeriod, e.rand.candidate)
		log.V(1).Info("Keeping the LeaseCandidate failed; retrying", "err", err, "wait", wait)
		t := e.clock.NewTimer(wait)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// candidateRetryMax caps the wait between failed attempts to keep the
// LeaseCandidate: a candidate whose watch is broken misses pings anyway,
// and the controller only drops candidates not renewed for 15 minutes.
const candidateRetryMax = 30 * time.Second

// candidateRetryWait is the wait after the n-th failed attempt in a row to
// keep the LeaseCandidate: RetryPeriod, doubling with each failure up to
// candidateRetryMax, plus up to a fifth more at random. A watch that ends
// at once costs a read, a write and a watch per wait, so after 30s of it
// a candidate sends one such round per 30s, not one per RetryPeriod.
func candidateRetryWait(n int, retryPeriod time.Duration, rand func() float64) time.Duration {
	d := retryPeriod
	for i := 1; i < n && d < candidateRetryMax; i++ {
		d *= 2
	}
	return jitter.Up(rand, min(d, candidateRetryMax), 0.2)
}

// renewCandidate creates the LeaseCandidate or writes a new renewTime, and
// returns the resourceVersion written.
func (e *Elector) renewCandidate(ctx context.Context, cands coordinationv1beta1client.LeaseCandidateInterface) (string, error) {
	co := e.cfg.Coordinated
	rctx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	now := metav1.NewMicroTime(e.clock.Now())
	spec := coordinationv1beta1.LeaseCandidateSpec{
		LeaseName:        e.cfg.Name,
		RenewTime:        &now,
		BinaryVersion:    co.BinaryVersion,
		EmulationVersion: co.EmulationVersion,
		Strategy:         co.Strategy,
	}
	cur, err := cands.Get(rctx, e.cfg.Identity, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		got, err := cands.Create(rctx, &coordinationv1beta1.LeaseCandidate{
			ObjectMeta: metav1.ObjectMeta{Name: e.cfg.Identity, Namespace: e.cfg.Namespace},
			Spec:       spec,
		}, metav1.CreateOptions{})
		if err != nil {
			return "", fmt.Errorf("creating LeaseCandidate: %w", err)
		}
		return got.ResourceVersion, nil
	}
	if err != nil {
		return "", fmt.Errorf("reading LeaseCandidate: %w", err)
	}
	spec.PingTime = cur.Spec.PingTime
	cur.Spec = spec
	got, err := cands.Update(rctx, cur, metav1.UpdateOptions{})
	if err != nil {
		return "", fmt.Errorf("renewing LeaseCandidate: %w", err)
	}
	return got.ResourceVersion, nil
}

// awaitPing watches the LeaseCandidate from rv and returns nil when it
// must be renewed: pinged, deleted, or candidateRenewInterval passed.
func (e *Elector) awaitPing(ctx context.Context, cands coordinationv1beta1client.LeaseCandidateInterface, rv string) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := cands.Watch(wctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", e.cfg.Identity).String(),
		ResourceVersion: rv,
	})
	if err != nil {
		return fmt.Errorf("watching LeaseCandidate: %w", err)
	}
	defer w.Stop()
	t := e.clock.NewTimer(candidateRenewInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C():
			return nil
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return errors.New("LeaseCandidate watch closed")
			}
			lc, isLC := ev.Object.(*coordinationv1beta1.LeaseCandidate)
			switch {
			case !isLC:
				return fmt.Errorf("LeaseCandidate watch: %v event", ev.Type)
			case ev.Type == "DELETED":
				return nil
			case lc.Spec.PingTime != nil && (lc.Spec.RenewTime == nil || lc.Spec.RenewTime.Before(lc.Spec.PingTime)):
				return nil
			}
		}
	}
}

// coordinatedWait reports whether a coordinated candidate must keep
// waiting before it takes the Lease in o at now, and until when (zero: until
// the Lease changes). It never adopts a term this process did not take
// itself. It may take the Lease when the Lease names its identity, no
// other preferred holder, and either:
//   - this process saw the election controller name it: the state that
//     names it without an acquireTime is the one its watch delivered right
//     after a state that named another holder, or none, or no Lease. Only
//     the controller writes such a state (every candidate of ours writes
//     an acquireTime, and a client-go candidate only renews a Lease that
//     already names it), and the acquiring write carries its
//     resourceVersion, so no other process with this identity renewed it
//     in between; or
//   - the state names its identity in any other way (an acquireTime, or no
//     acquireTime but first seen by a read or after a state that named it
//     already) and it has expired by this candidate's own clock, as any
//     other holder's term would have to. That state may record a term of a
//     predecessor with the same name, ours or client-go's (which keeps the
//     controller's empty acquireTime while it holds), alive but cut off: a
//     process restarted with its predecessor's identity (a pod name) must
//     never believe it still holds its predecessor's term.
func (e *Elector) coordinatedWait(o observation, now time.Time) (wait bool, until time.Time) {
	if o.lease == nil || o.rec.Holder != e.cfg.Identity ||
		(o.rec.PreferredHolder != "" && o.rec.PreferredHolder != e.cfg.Identity) {
		return true, time.Time{} // the controller has not named us
	}
	e.mu.Lock()
	witnessed := e.witnessed != "" && e.witnessed == o.rv
	e.mu.Unlock()
	if witnessed && o.rec.AcquireTime.IsZero() {
		return false, time.Time{} // named by the controller as we watched
	}
	if o.held(now) {
		return true, o.expiry() // a term of our identity, maybe a predecessor's
	}
	return false, time.Time{}
}
