package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/reconkit/reconkit/lbrecon"
)

// seedRecon re-implements, for comparison, the algorithm of the original
// load-balancer reconciliation this package replaces. Its call pattern is
// kept on purpose:
//
//   - every pass lists the tagged objects, then GETs each of them;
//   - everything is serial;
//   - objects are created untagged and tagged afterwards, one call per tag,
//     under a process-wide mutex;
//   - failed objects are destroyed and recreated, without limit;
//   - pending objects are polled with apimachinery's wait.ExponentialBackoff
//     (1s, factor 1.5, jitter 1.5, a fixed number of steps), which polls at
//     once, GETs every object on its first round and every non-ok one after,
//     and does not watch any context.
//
// The desired state comes from the same steps as lbrecon's load-balancer
// plan, all run on every pass; a step skips objects whose parents do not
// exist yet, so creation proceeds in the same waves.
type seedRecon struct {
	eng          lbrecon.Engine
	lb           lbrecon.LoadBalancer
	tags         []string
	backoffSteps int

	failed, progressing []lbrecon.Object
}

var (
	errSeedProgressing    = errors.New("seed: resource still progressing")
	errSeedFailed         = errors.New("seed: resource in failure state")
	errSeedNotDestroyable = errors.New("seed: failed to destroy some resources")
)

// seedTagMutex is the original's process-wide tagging lock.
var seedTagMutex sync.Mutex

func (r *seedRecon) retrieveState(ctx context.Context) (*lbrecon.Observation, error) {
	r.failed, r.progressing = nil, nil
	listed, err := r.eng.List(ctx, lbrecon.Query{Tag: r.tags[0]})
	if err != nil {
		if errors.Is(err, lbrecon.ErrNotFound) { // "nothing tagged"
			return lbrecon.NewObservation(nil), nil
		}
		return nil, fmt.Errorf("error retrieving resources: %w", err)
	}
	var frontends, backends, binds, servers []lbrecon.Object
	for _, ref := range listed {
		if !ref.HasTag(r.tags[0]) {
			continue // listing by tag only
		}
		obj, err := r.eng.Get(ctx, lbrecon.Object{Kind: ref.Kind, ID: ref.ID})
		if err != nil {
			return nil, fmt.Errorf("error retrieving typed resource: %w", err)
		}
		switch s := obj.Spec.(type) {
		case lbrecon.FrontendSpec:
			if s.LoadBalancer == r.lb.ID {
				frontends = append(frontends, obj)
				r.sort(obj)
			}
		case lbrecon.BackendSpec:
			if s.LoadBalancer == r.lb.ID {
				backends = append(backends, obj)
				r.sort(obj)
			}
		case lbrecon.BindSpec:
			binds = append(binds, obj)
		case lbrecon.ServerSpec:
			servers = append(servers, obj)
		}
	}
	ids := map[string]bool{}
	for _, o := range append(frontends, backends...) {
		ids[o.ID] = true
	}
	all := append(frontends, backends...)
	for _, b := range binds {
		if ids[b.Spec.(lbrecon.BindSpec).Frontend] {
			all = append(all, b)
			r.sort(b)
		}
	}
	for _, s := range servers {
		if ids[s.Spec.(lbrecon.ServerSpec).Backend] {
			all = append(all, s)
			r.sort(s)
		}
	}
	return lbrecon.NewObservation(all), nil
}

func (r *seedRecon) sort(o lbrecon.Object) {
	switch o.State {
	case lbrecon.StateFailed:
		r.failed = append(r.failed, o)
	case lbrecon.StatePending:
		r.progressing = append(r.progressing, o)
	}
}

func (r *seedRecon) check(ctx context.Context) (toCreate, toDestroy []lbrecon.Object, err error) {
	obs, err := r.retrieveState(ctx)
	if err != nil {
		return nil, nil, err
	}
	if len(r.failed) > 0 {
		return nil, r.failed, nil
	}
	if len(r.progressing) > 0 {
		return nil, nil, errSeedProgressing
	}
	for _, st := range r.lb.Steps() {
		ch, err := st.Plan(ctx, obs)
		if err != nil {
			return nil, nil, err
		}
		// The original has no update: a changed object is destroyed and
		// created again.
		toCreate = append(toCreate, ch.Create...)
		toDestroy = append(toDestroy, ch.Destroy...)
		for _, u := range ch.Update {
			toCreate = append(toCreate, u.Desired)
			toDestroy = append(toDestroy, u.Current)
		}
	}
	return toCreate, toDestroy, nil
}

func (r *seedRecon) reconcile(ctx context.Context) error {
	for completed := false; !completed; {
		toCreate, toDestroy, err := r.check(ctx)
		if err != nil {
			if !errors.Is(err, errSeedProgressing) {
				return err
			}
			// As in the original, the pass then goes on with an empty
			// plan, which ends the loop.
			if err := r.waitFor(ctx, r.progressing); err != nil {
				return err
			}
		}
		switch {
		case len(toDestroy) > 0:
			for allowRetry := true; len(toDestroy) > 0 && allowRetry; {
				allowRetry = false
				var again []lbrecon.Object
				for _, o := range toDestroy {
					if err := r.eng.Destroy(ctx, o); err != nil && !errors.Is(err, lbrecon.ErrNotFound) {
						again = append(again, o)
					} else {
						allowRetry = true
					}
				}
				toDestroy = again
			}
			if len(toDestroy) > 0 {
				return errSeedNotDestroyable
			}
		case len(toCreate) > 0:
			created := make([]lbrecon.Object, 0, len(toCreate))
			for _, o := range toCreate {
				o.Tags = nil
				c, err := r.eng.Create(ctx, o)
				if err != nil {
					return fmt.Errorf("error creating resource: %w", err)
				}
				if err := r.tag(ctx, c); err != nil {
					return fmt.Errorf("error tagging resource: %w", err)
				}
				created = append(created, c)
			}
			if err := r.waitFor(ctx, created); err != nil && !errors.Is(err, errSeedFailed) {
				return err
			}
		default:
			completed = true
		}
	}
	return nil
}

func (r *seedRecon) tag(ctx context.Context, o lbrecon.Object) error {
	seedTagMutex.Lock()
	defer seedTagMutex.Unlock()
	for _, t := range r.tags {
		if err := r.eng.Tag(ctx, o, []string{t}); err != nil {
			return err
		}
	}
	return nil
}

func (r *seedRecon) waitFor(ctx context.Context, objs []lbrecon.Object) error {
	firstPass := true
	return wait.ExponentialBackoff(wait.Backoff{
		Duration: time.Second, Factor: 1.5, Jitter: 1.5, Steps: r.backoffSteps, Cap: 5 * time.Minute,
	}, func() (bool, error) {
		var notReady, failed int
		for i, o := range objs {
			if o.State == lbrecon.StateOK && !firstPass {
				continue
			}
			got, err := r.eng.Get(ctx, o)
			if err != nil {
				failed++
				continue
			}
			objs[i] = got
			switch got.State {
			case lbrecon.StatePending:
				notReady++
			case lbrecon.StateFailed:
				failed++
			}
		}
		firstPass = false
		switch {
		case failed > 0:
			return false, errSeedFailed
		case notReady > 0:
			return false, nil
		}
		return true, nil
	})
}
