package fleetsim

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// starts runs a fleet of n agents that only wait, with no fault, and
// returns when each agent first started, since the run began.
func starts(t *testing.T, seed uint64, n int) []time.Duration {
	t.Helper()
	at := make([]time.Duration, n)
	synctest.Test(t, func(t *testing.T) {
		begin := time.Now()
		var mu sync.Mutex
		r := Simulate(t.Context(), Config{Seed: seed, Agents: n, Duration: time.Minute, Quiet: time.Second,
			Nemesis: Nemesis{}.Only(),
			Agent: func(ctx context.Context, d Deps) error {
				if d.Boot == 0 {
					mu.Lock()
					at[d.Index] = time.Since(begin)
					mu.Unlock()
				}
				<-ctx.Done()
				return nil
			}})
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
	})
	return at
}

// The agents start at distinct instants within the first second, drawn
// from the seed: the same instants for one seed in every run, other
// instants for another seed.
func TestStaggeredStarts(t *testing.T) {
	const n = 8
	one, again, other := starts(t, 7, n), starts(t, 7, n), starts(t, 8, n)
	for i, d := range one {
		if d < 0 || d >= stagger {
			t.Errorf("agent-%d started at %s, want within [0, %s)", i, d, stagger)
		}
	}
	sorted := slices.Clone(one)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != n {
		t.Errorf("agents started at %v: some at one instant, want each at its own", one)
	}
	if !slices.Equal(one, again) {
		t.Errorf("seed 7 started its agents at %v, then at %v: want the same instants", one, again)
	}
	if slices.Equal(one, other) {
		t.Errorf("seeds 7 and 8 started their agents at the same instants %v", one)
	}
}

// Each agent's client sees changes after a delay of its own, drawn from
// the seed, under maxWatchDelay.
func TestWatchDelays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		seen := map[int]time.Duration{}
		var written time.Time
		r := Simulate(t.Context(), Config{Seed: 3, Agents: 4, Duration: time.Minute, Quiet: time.Second,
			Nemesis: Nemesis{}.Only(),
			Agent: func(ctx context.Context, d Deps) error {
				w, err := d.Kube.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
				if err != nil {
					return err
				}
				defer w.Stop()
				if d.Index == 0 {
					<-time.After(10 * time.Second) // every agent watches by then
					mu.Lock()
					written = time.Now()
					mu.Unlock()
					_, err := d.Kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
						ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "change"}}, metav1.CreateOptions{})
					if err != nil {
						return err
					}
				}
				select {
				case <-w.ResultChan():
					mu.Lock()
					seen[d.Index] = time.Since(written)
					mu.Unlock()
				case <-ctx.Done():
				}
				<-ctx.Done()
				return nil
			}})
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		at := map[time.Duration]int{}
		for i := range 4 {
			d, ok := seen[i]
			if !ok {
				t.Fatalf("agent-%d saw no change", i)
			}
			if d < 0 || d >= maxWatchDelay {
				t.Errorf("agent-%d saw the change %s after it was written, want under %s", i, d, maxWatchDelay)
			}
			at[d]++
		}
		if len(at) != 4 {
			t.Errorf("agents saw the change after %v: some at one instant, want each at its own", seen)
		}
	})
}

// The provider's read replicas draw their lags from the run's seed: one
// seed, one history; other seeds, other lags.
func TestProviderDrawsFromTheSeed(t *testing.T) {
	shownAfter := func(seed uint64) time.Duration {
		var took time.Duration
		synctest.Test(t, func(t *testing.T) {
			r := Simulate(t.Context(), Config{Seed: seed, Agents: 1, Duration: time.Minute, Quiet: time.Second,
				Nemesis:  Nemesis{}.Only(),
				Provider: lbrecontest.Config{ReplicaLag: 10 * time.Second},
				Agent: func(ctx context.Context, d Deps) error {
					if d.Boot > 0 {
						<-ctx.Done()
						return nil
					}
					obj := lbrecon.Object{Kind: lbrecon.KindBackend, Name: "b", Tags: []string{"t"},
						Spec: lbrecon.BackendSpec{LoadBalancer: "lb"}}
					created := time.Now()
					if _, err := d.Engine.Create(lbrecon.WithToken(ctx, 1), obj); err != nil {
						return err
					}
					for {
						objs, err := d.Engine.List(ctx, lbrecon.Query{Tag: "t"})
						if err != nil {
							return err
						}
						if len(objs) > 0 {
							took = time.Since(created)
							<-ctx.Done()
							return nil
						}
						select {
						case <-time.After(10 * time.Millisecond):
						case <-ctx.Done():
							return nil
						}
					}
				}})
			if err := r.Err(); err != nil {
				t.Fatal(err)
			}
		})
		return took
	}
	first := shownAfter(1)
	if again := shownAfter(1); again != first {
		t.Errorf("seed 1: the creation showed after %s, then after %s: want one history per seed", first, again)
	}
	differs := false
	for seed := uint64(2); seed <= 6 && !differs; seed++ {
		differs = shownAfter(seed) != first
	}
	if !differs {
		t.Errorf("seeds 1 to 6 all showed the creation after %s: the provider's lags do not follow the run's seed", first)
	}
}

// A run's apiserver keeps no managedFields on Leases unless the host asks
// for every resource to be tracked (an empty, non-nil UntrackedFields).
func TestLeasesUntrackedByDefault(t *testing.T) {
	c := Config{}.withDefaults()
	require.Equal(t, []schema.GroupResource{{Group: "coordination.k8s.io", Resource: "leases"}}, c.Kube.UntrackedFields)
	c = Config{Kube: kubefake.Config{UntrackedFields: []schema.GroupResource{}}}.withDefaults()
	require.Empty(t, c.Kube.UntrackedFields)
}
