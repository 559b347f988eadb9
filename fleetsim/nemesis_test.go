package fleetsim

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reconkit/reconkit/versiongate"
)

// A rolling upgrade that one agent began is completed by the quiet period:
// every agent's last run is at the release the upgrade reached.
func TestQuietCompletesUpgrade(t *testing.T) {
	v1, v2 := versiongate.Version{Release: versiongate.Release{Major: 1}}, versiongate.Version{Release: versiongate.Release{Major: 2}}
	var mu sync.Mutex
	last := map[string]versiongate.Release{}
	agent := func(ctx context.Context, d Deps) error {
		mu.Lock()
		last[d.Name] = d.Release.Release
		mu.Unlock()
		<-ctx.Done()
		return nil
	}
	// One upgrade in the first minute, none after it: the others stay at
	// 1.0 until the quiet period.
	cfg := Config{Agent: agent, Agents: 3, Duration: 90 * time.Second, Quiet: time.Minute,
		Gate:    Gate{Releases: []versiongate.Version{v1, v2}},
		Nemesis: Nemesis{Every: time.Minute}.Only(RollingUpgrade)}
	r := simulate(t, cfg)
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	tl := Window(r.Timeline, 0, 0, time.Hour)
	if !strings.Contains(tl, "rolling-upgrade: agent-") || !strings.Contains(tl, "rolling upgrade completes") {
		t.Fatalf("no upgrade began, or none was completed:\n%s", tl)
	}
	for name, r := range last {
		if r != v2.Release {
			t.Errorf("%s's last run is at %s, want %s", name, r, v2.Release)
		}
	}
}
