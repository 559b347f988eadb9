package kubefake

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"
)

// DefaultWatchHistory is how many changes a server keeps for watches
// that start from an older resourceVersion when Config.WatchHistory is 0.
const DefaultWatchHistory = 1000

// Config configures a server and its clients. The zero value is ready to
// use and models no adversity: every knob is off when zero.
type Config struct {
	// Clock stamps creationTimestamp and deletionTimestamp (truncated to
	// the second, as the apiserver stores them); nil means the real clock.
	// When it is a clock.Clock (a FakeClock, or the real clock inside a
	// synctest bubble), Latency and WatchLifetime are waited out on it;
	// otherwise on the real clock.
	Clock clock.PassiveClock
	// WatchHistory is how many changes are kept for watches started from
	// an older resourceVersion; a watch from before the oldest kept change
	// fails with 410 Gone, as it does when the apiserver's watch cache has
	// moved on. 0 means DefaultWatchHistory. The history is one across
	// all resources, so writes to any resource push a change out.
	WatchHistory int
	// WatchWindow, when set, also drops from that history every change
	// written longer ago than this on Clock, as etcd's compaction
	// (--etcd-compaction-interval, 5 minutes by default) and a watch cache
	// under write load drop them: a watch from a resourceVersion older
	// than the window gets 410 Gone even when fewer than WatchHistory
	// changes followed it. 0 means changes are dropped by number only.
	WatchWindow time.Duration
	// Latency is how long every request waits on the clock before the
	// server serves it, as a round trip to the apiserver takes. A request
	// cannot be cancelled while it waits (a reactor sees no context). 0
	// means none.
	Latency time.Duration
	// CacheLag is how many changes of a resource the watch cache trails
	// the store by. Reads with resourceVersion "0", reads with an older
	// resourceVersion than the cache holds, and every watch are served
	// from the cache, as the apiserver serves them; reads with no
	// resourceVersion are served from the store. 0 means the cache keeps
	// up with the store (Server.PauseCache stops it anyway).
	CacheLag int
	// WatchLifetime ends every watch this long after it started, as the
	// apiserver ends watches after its --min-request-timeout (there, a
	// random duration between 1 and 2 times 1800s). 0 means watches end
	// only when stopped, cut or ended by Server.EndWatches.
	WatchLifetime time.Duration
	// UntrackedFields names resources whose objects keep no
	// managedFields: a create, update or patch of one stores it without
	// them, and skips the field manager, which is most of what a write
	// costs. It is for long simulations whose clients never read those
	// resources' managedFields; the apiserver tracks every resource.
	// Server-side apply of an untracked resource still works, but finds
	// no other manager to conflict with, and what it owns is forgotten at
	// the next write that is not an apply. nil tracks every resource, as
	// the apiserver does.
	UntrackedFields []schema.GroupResource
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
// It is the one-client shortcut for c.NewServer(objects...).NewClient():
// the clientset's Tracker is the server's store. Tests that need a second
// client, a partition or injected faults use NewServer.
//
// The objects get resourceVersions in the order given; an object that
// carries a numeric resourceVersion keeps it and raises the counter past
// it.
func (c Config) NewClientset(objects ...runtime.Object) *fake.Clientset {
	return c.NewServer(objects...).NewClient().Clientset
}
