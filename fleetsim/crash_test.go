package fleetsim

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// farewell is an agent that, when its context ends, writes a synced file
// to its disk and creates a ConfigMap, and at every start reports whether
// an earlier run's farewell reached the disk or the apiserver, and whether
// a file it wrote without syncing survived. It calls waiting once a run
// wrote that file and waits for its end: a crash after that is one the
// test can judge.
func farewell(seen func(d Deps, what string), waiting func(d Deps)) Agent {
	return func(ctx context.Context, d Deps) error {
		if _, err := d.FS.ReadFile(d.Dir + "/farewell"); err == nil {
			seen(d, "a farewell file on disk")
		}
		if _, err := d.FS.ReadFile(d.Dir + "/unsynced"); err == nil && d.Boot > 0 {
			seen(d, "an unsynced file after a crash")
		}
		if _, err := d.Kube.CoreV1().ConfigMaps("default").Get(ctx, "farewell-"+d.Name, metav1.GetOptions{}); err == nil {
			seen(d, "a farewell ConfigMap")
		}
		if f, err := d.FS.Create(d.Dir+"/unsynced", 0o600); err == nil {
			_, _ = f.Write([]byte("lost at a crash"))
			_ = f.Close()
			waiting(d)
		}
		<-ctx.Done()
		// What a process does on its way out: a crash must let none of it
		// reach the world.
		if f, err := d.FS.Create(d.Dir+"/farewell", 0o600); err == nil {
			_, _ = f.Write([]byte("bye"))
			_ = f.Sync()
			_ = f.Close()
			_ = d.FS.SyncDir(d.Dir)
		}
		_, _ = d.Kube.CoreV1().ConfigMaps("default").Create(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "farewell-" + d.Name}}, metav1.CreateOptions{})
		return nil
	}
}

// A crash is a power loss: nothing the agent does once its context ended
// reaches its disk or the apiserver, and what it had not synced is gone
// when it starts again on the same disk.
func TestCrashIsPowerLoss(t *testing.T) {
	var (
		mu      sync.Mutex
		seen    []string
		waited  = map[string]bool{} // agent and run that wrote its unsynced file and waited
		crashed int                 // runs started after a run that had waited: a crash came there
	)
	run := func(d Deps, boot int) string { return fmt.Sprint(d.Name, " run ", boot+1) }
	r := simulate(t, Config{Agent: farewell(func(d Deps, what string) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("%s: %s", run(d, d.Boot), what))
	}, func(d Deps) {
		mu.Lock()
		defer mu.Unlock()
		waited[run(d, d.Boot)] = true
		if d.Boot > 0 && waited[run(d, d.Boot-1)] {
			crashed++
		}
	}), Nemesis: Nemesis{}.Only(Crash), Duration: 10 * time.Minute, Quiet: time.Minute})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	restarts := 0
	for _, e := range r.Timeline {
		if strings.Contains(e.What, "starts (run 2)") {
			restarts++
		}
	}
	if restarts == 0 {
		t.Fatal("no agent was crashed and started again")
	}
	// The crashes came where the test judges them: while a run waited,
	// its unsynced file written and its farewell not yet made.
	if crashed == 0 {
		t.Fatal("no crash came while a run waited with its unsynced file written")
	}
	t.Logf("%d agents restarted; %d runs began after a crash of a run that waited", restarts, crashed)
	if len(seen) > 0 {
		t.Errorf("after crashes the agents found:\n%s", strings.Join(seen, "\n"))
	}
}

// crashTargets returns the agents the nemesis chose to crash, in order.
func crashTargets(r Result) []string {
	re := regexp.MustCompile(`^crash: (agent-\d+)`)
	var out []string
	for _, e := range r.Timeline {
		if m := re.FindStringSubmatch(e.What); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

// Turning a kind of event on shifts no other kind's draws: the crashes
// choose the same agents, in the same order, with or without outages.
func TestKindsDrawApart(t *testing.T) {
	cfg := Config{Seed: 5, Agent: poller(time.Second), Duration: 30 * time.Minute, Quiet: time.Minute,
		Nemesis: Nemesis{}.Only(Crash)}
	alone := crashTargets(simulate(t, cfg))
	cfg.Nemesis = Nemesis{}.Only(Crash, ProviderOutage, PartitionProvider)
	mixed := crashTargets(simulate(t, cfg))
	n := min(len(alone), len(mixed))
	if n < 5 {
		t.Fatalf("%d and %d crashes, want at least 5 of each", len(alone), len(mixed))
	}
	if !slices.Equal(alone[:n], mixed[:n]) {
		t.Errorf("crashes chose\n%v alone and\n%v among other kinds", alone[:n], mixed[:n])
	}
}
