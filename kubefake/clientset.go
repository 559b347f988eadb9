package kubefake

import (
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
)

// DefaultWatchHistory is how many changes a clientset keeps for watches
// that start from an older resourceVersion when Config.WatchHistory is 0.
const DefaultWatchHistory = 1000

// Config configures a clientset. The zero value is ready to use.
type Config struct {
	// Clock stamps creationTimestamp and deletionTimestamp (truncated to
	// the second, as the apiserver stores them); nil means the real clock.
	Clock clock.PassiveClock
	// WatchHistory is how many changes are kept for watches started from
	// an older resourceVersion; a watch from before the oldest kept change
	// fails with 410 Gone, as it does when the apiserver's watch cache has
	// moved on. 0 means DefaultWatchHistory.
	WatchHistory int
}

// NewClientset returns client-go's fake clientset holding objects, with
// reactors in front of its object tracker that keep resourceVersions as
// the apiserver does. It is Config{}.NewClientset(objects...).
func NewClientset(objects ...runtime.Object) *fake.Clientset {
	return Config{}.NewClientset(objects...)
}

// NewClientset returns client-go's fake clientset holding objects, with
// reactors in front of its object tracker that keep resourceVersions as
// the apiserver does (see the package doc for what is and is not
// modelled). Reactors a test prepends afterwards run before these, so
// fault injection composes as usual.
//
// The objects get resourceVersions in the order given; an object that
// carries a numeric resourceVersion keeps it and raises the counter past
// it.
func (c Config) NewClientset(objects ...runtime.Object) *fake.Clientset {
	// The counter starts at 1, so that no list answers "0", which means
	// "any" to a watch.
	s := &server{clock: c.Clock, keep: c.WatchHistory, rv: 1}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.keep <= 0 {
		s.keep = DefaultWatchHistory
	}
	stamped := make([]runtime.Object, 0, len(objects))
	for _, o := range objects {
		o = o.DeepCopyObject()
		if m, err := meta.Accessor(o); err == nil {
			if n, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64); err == nil && n > 0 {
				s.rv = max(s.rv, n)
			} else {
				m.SetResourceVersion(s.next())
			}
			s.stampNew(m)
		}
		stamped = append(stamped, o)
	}
	cs := fake.NewClientset(stamped...)
	s.tracker = cs.Tracker()
	s.react = k8stesting.ObjectReaction(s.tracker)
	cs.PrependReactor("*", "*", s.handle)
	cs.PrependWatchReactor("*", s.watch)
	return cs
}
