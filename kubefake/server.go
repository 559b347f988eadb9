package kubefake

import (
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
)

// Server is one fake apiserver: one store, one resourceVersion counter
// across all resources, one watch cache, and the adversities set on it.
// Any number of clients share it, each over a network of its own (see
// Client). Its methods are safe for concurrent use.
type Server struct {
	cfg   Config
	clock clock.PassiveClock
	timer clock.Clock // waits out Latency and WatchLifetime
	keep  int         // changes kept in history

	tracker k8stesting.ObjectTracker
	react   k8stesting.ReactionFunc
	base    *fake.Clientset // holds the store until the first client takes it

	mu       sync.Mutex                               // orders every write, as etcd orders revisions
	rv       uint64                                   // the last resourceVersion handed out, across all resources
	uids     uint64                                   // uids handed out
	names    uint64                                   // generateName suffixes handed out
	history  []change                                 // the newest changes, oldest first
	compact  uint64                                   // a watch must start at or after this resourceVersion
	watchers []*watcher                               // open, oldest first: changes reach them in that order, the same in every run
	pending  map[schema.GroupVersionResource][]change // written, not yet in the watch cache
	paused   bool                                     // the watch cache does not follow the store
	faults   []*Fault
}

// NewServer returns a server holding objects. The objects get
// resourceVersions in the order given; an object that carries a numeric
// resourceVersion keeps it and raises the counter past it.
func (c Config) NewServer(objects ...runtime.Object) *Server {
	// The counter starts at 1, so that no list answers "0", which means
	// "any" to a watch.
	s := &Server{cfg: c, clock: c.Clock, keep: c.WatchHistory, rv: 1,
		pending: map[schema.GroupVersionResource][]change{}}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if t, ok := s.clock.(clock.Clock); ok {
		s.timer = t
	} else {
		s.timer = clock.RealClock{}
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
	s.base = fake.NewClientset(stamped...)
	s.tracker = s.base.Tracker()
	s.react = k8stesting.ObjectReaction(s.tracker)
	if ft, ok := newFieldTracker(s.tracker, c.UntrackedFields...); ok {
		// The same writes, without a REST mapper built for each.
		s.react = k8stesting.ObjectReaction(ft)
	}
	return s
}

// Tracker returns the server's store. Objects added or changed through it
// directly get no resourceVersion and reach no watch.
func (s *Server) Tracker() k8stesting.ObjectTracker { return s.tracker }

// NewClient returns a new client of the server. Each client is its own
// client-go fake clientset, with its own reactors and its own network:
// reactors prepended on one client, and a Cut of one, leave the others
// alone. The first client's Tracker is the server's store; later
// clients' Trackers hold nothing (use Server.Tracker).
func (s *Server) NewClient() *Client {
	s.mu.Lock()
	cs := s.base
	s.base = nil
	s.mu.Unlock()
	if cs == nil {
		cs = fake.NewClientset()
	}
	c := &Client{Clientset: cs, srv: s}
	cs.PrependReactor("*", "*", c.serve)
	cs.PrependWatchReactor("*", c.watch)
	return c
}

// serve is every request of one client: it travels the client's network,
// meets the injected faults, then reaches the store.
func (c *Client) serve(action k8stesting.Action) (bool, runtime.Object, error) {
	s := c.srv
	c.requests.add(action)
	s.delay()
	if err := c.refused(action); err != nil {
		return true, nil, err
	}
	if c.landing != nil {
		c.landing(action)
	}
	// The link may have been cut since the check above: then the request
	// is refused, whole, as Cut promises. Cut waits for one that looked
	// at the link after it until the store answered it.
	c.link.RLock()
	defer c.link.RUnlock()
	if c.cut {
		return true, nil, refused(action)
	}
	f, err := s.fault(action)
	if f != nil && !f.AfterWrite {
		return true, nil, err
	}
	_, obj, herr := s.handle(action)
	if f != nil {
		// The request was served; its answer, whatever it was, is lost.
		return true, nil, err
	}
	return true, obj, herr
}

// delay waits out the configured latency on the clock.
func (s *Server) delay() {
	if d := s.cfg.Latency; d > 0 {
		t := s.timer.NewTimer(d)
		<-t.C()
	}
}

func (s *Server) handle(action k8stesting.Action) (bool, runtime.Object, error) {
	switch a := action.(type) {
	case k8stesting.CreateActionImpl:
		if a.GetSubresource() != "" {
			// Eviction, token requests and the like: the tracker's behaviour.
			return s.react(a)
		}
		return s.create(a)
	case k8stesting.UpdateActionImpl:
		return s.update(a)
	case k8stesting.PatchActionImpl:
		return s.patch(a)
	case k8stesting.DeleteActionImpl:
		return s.delete(a)
	case k8stesting.ListActionImpl:
		return s.list(a)
	case k8stesting.GetActionImpl:
		return s.get(a)
	}
	return s.react(action)
}
