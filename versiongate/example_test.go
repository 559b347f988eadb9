package versiongate_test

import (
	"fmt"

	"github.com/reconkit/reconkit/versiongate"
)

// A leader at release 2.0.0, whose state breaks nodes below 1.5.0, finds a
// status written by a 1.9.0 reconciler that still admits 1.0.0 nodes. It
// must restrict before it reconciles; a 1.2.0 node then no longer passes
// WaitReady, a 1.6.0 node does.
func Example() {
	local, err := versiongate.ParseVersion("2.0.0+abc123")
	if err != nil {
		fmt.Println(err)
		return
	}
	minCompat, _ := versiongate.ParseRelease("1.5.0")
	target := versiongate.Status{State: versiongate.StateDone, Version: local, MinimumCompatibleRelease: minCompat}

	current := versiongate.Status{
		State:                    versiongate.StateDone,
		Version:                  versiongate.Version{Release: versiongate.Release{Major: 1, Minor: 9}},
		MinimumCompatibleRelease: versiongate.Release{Major: 1},
	}
	action := versiongate.Decide(&current, target)
	fmt.Println("action:", action)
	restricted := versiongate.Restricted(current, target)
	fmt.Println("restricted:", restricted)

	for _, node := range []string{"1.2.0", "1.6.0"} {
		r, _ := versiongate.ParseRelease(node)
		ok, why := versiongate.Ready(restricted, r, versiongate.Release{Major: 1})
		if ok {
			fmt.Printf("%s: ready\n", r)
		} else {
			fmt.Printf("%s: waits: %s\n", r, why)
		}
	}
	// Output:
	// action: restrict
	// restricted: working at 1.9.0, minimum compatible release 1.5.0
	// 1.2.0: waits: local release 1.2.0 is below the minimum compatible release 1.5.0
	// 1.6.0: ready
}
