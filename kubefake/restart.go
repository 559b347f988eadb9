package kubefake

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Restart restarts the apiserver, as an upgrade or a crash does, while
// the store (etcd) lives on: every open watch of every client ends (its
// result channel closes), and the watch cache starts again from the
// store with no history, so a watch from any resourceVersion handed out
// before the restart gets a 410 Gone (reason Expired) as its one event,
// as it does from an apiserver whose fresh watch cache begins after it.
// The restarted apiserver's own writes (its identity Lease) raise the
// resourceVersion once; a List after the restart answers a
// resourceVersion a watch can start from. A paused cache follows the
// store again (see PauseCache).
//
// The server answers again at once. To model the time it is down,
// Cut the clients or Inject Unavailable() around the call.
func (s *Server) Restart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range slices.Clone(s.watchers) { // end removes w
		w.end()
	}
	s.next()
	s.history = nil
	s.compact = s.rv
	s.pending = map[schema.GroupVersionResource][]change{}
	s.paused = false
}
