package fleetsim

import (
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// slowness is how long one run's reads and writes wait before the
// apiserver sees them; zero is none.
type slowness struct {
	reads, writes atomic.Int64 // time.Duration
}

// isRead tells a read (get, list) from a write.
func isRead(verb string) bool { return verb == "get" || verb == "list" }

// slowReactor returns the first reactor of s's client: it waits the run's
// read or write latency before passing the request on.
//
// client-go's fake clientset runs its reactors with its lock held, so a
// reactor that waited with it would block the client's other requests on a
// mutex, which stops time in a bubble. This one lets go of the lock while it
// waits, on a timer (which lets time move), and takes it again before the
// next reactor runs: the other requests of the client go on meanwhile, as
// they would on a connection of their own. The reaction chain was read
// before it began, and every other use of the lock keeps its own critical
// section, so nothing is seen half done.
func (s *slot) slowReactor() k8stesting.ReactionFunc {
	c := s.kube
	return func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := s.slow.writes.Load()
		if isRead(a.GetVerb()) {
			d = s.slow.reads.Load()
		}
		if d <= 0 {
			return false, nil, nil
		}
		c.Fake.Unlock() // held by Fake.Invokes
		time.Sleep(time.Duration(d))
		c.Fake.Lock()
		return false, nil, nil
	}
}
