package configmapsource

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/internal/jitter"
)

// DefaultWatchTimeout is how long one watch request lasts when
// Config.WatchTimeout is 0.
const DefaultWatchTimeout = 10 * time.Minute

// Config configures a [Source].
type Config struct {
	// Client reads the ConfigMap. Required.
	Client kubernetes.Interface
	// Namespace and Name locate the ConfigMap. Required.
	Namespace, Name string
	// Key is the data key holding the payload; it is looked up in Data,
	// then in BinaryData. Required.
	Key string
	// WatchTimeout bounds each watch request, on the server (timeoutSeconds)
	// and on the client's clock, with up to 10% jitter so that nodes do not
	// renew together; a watch that ends is resumed from the last
	// resourceVersion seen. It also bounds how long a silently broken
	// connection goes unnoticed. 0 means DefaultWatchTimeout.
	WatchTimeout time.Duration
	// OnRequest, if set, is told of every request the source starts:
	// "list" or "watch". It must not block.
	OnRequest func(verb string)
	// Clock is the time source; nil means the real clock.
	Clock clock.Clock
	// Rand draws the jitter of Watch's retries and of each watch's
	// timeout, uniformly in [0, 1); nil means math/rand/v2's Float64.
	// Watch calls it from its caller's goroutine only.
	Rand func() float64
}

// Source is a [checkpoint.ConfigSource] that watches one key of one
// ConfigMap. It lists the ConfigMap once (a quorum read, never older than
// what it saw), then watches it from that resourceVersion, resuming each
// watch from the last version seen (bookmarks included). When the server
// answers 410 Gone (the version was compacted away) it lists again. The
// ConfigMap's UID and resourceVersion name the checkpoint; a metadata-only
// edit is a new ID with the same payload, which the Controller recognises
// by hash. A ConfigMap without a UID or a resourceVersion (client-go's fake
// clientset sets neither) is delivered without them, and the Controller
// names its payload by hash ([checkpoint.HashID]); one whose
// resourceVersion does not change when its payload does (the fake again,
// if the object was created with one) is named by hash by the Controller
// too. Either way an updated ConfigMap is assigned, never ignored.
//
// A missing ConfigMap or key delivers nothing (the node keeps what runs)
// and is logged. Compared with polling one GET per node every 30 s (120
// requests per node per hour, 167 GET/s at 5,000 nodes), a watch costs one
// list at start and one request per WatchTimeout.
//
// A watch that ends within a second having delivered nothing (an EOF from
// a proxy or load balancer that cuts every watch, a 410 right after a
// fresh list, a bookmark of the resourceVersion it started from) is
// followed by a wait that grows from 100 ms to 30 s until a
// watch delivers an event: such a server is never asked again at once
// (TestWatchEndingAtOnceDoesNotSpin). Whatever the server answers for
// good (403, 404, 409, 410, 422, 429, 5xx, a refused connection, a watch
// that ends at once), failed attempts are retried from 100 ms growing to
// 30 s with ±20% jitter: from 30 s on, at most one list and one watch per
// wait (TestRequestBudgetUnderPersistentAnswers). After an API server
// restart it watches again from the last version seen, and lists once if
// that answers 410 (TestRequestsAfterAPIServerRestart).
type Source struct {
	cfg    Config
	clock  clock.Clock
	origin string
}

var _ checkpoint.ConfigSource = (*Source)(nil)

// New returns a Source for cfg, filling defaults and rejecting bad values.
func New(cfg Config) (*Source, error) {
	var errs []error
	if cfg.Client == nil {
		errs = append(errs, errors.New("missing Client"))
	}
	if cfg.Namespace == "" || cfg.Name == "" || cfg.Key == "" {
		errs = append(errs, errors.New("missing Namespace, Name or Key"))
	}
	if cfg.WatchTimeout < 0 {
		errs = append(errs, fmt.Errorf("WatchTimeout is %v, must not be negative", cfg.WatchTimeout))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("configmapsource: invalid config: %w", errors.Join(errs...))
	}
	if cfg.WatchTimeout == 0 {
		cfg.WatchTimeout = DefaultWatchTimeout
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Source{cfg: cfg, clock: clk, origin: fmt.Sprintf("configmap %s/%s key %s", cfg.Namespace, cfg.Name, cfg.Key)}, nil
}

// Watch implements [checkpoint.ConfigSource]. Failed requests are retried
// with backoff (and logged quietly); Watch returns nil when ctx ends.
func (s *Source) Watch(ctx context.Context, assign func(context.Context, []byte, checkpoint.Source)) error {
	rv := "" // the last resourceVersion seen; "" means list first
	for ctx.Err() == nil {
		err := backoff.Retry(ctx, func(ctx context.Context) error {
			return s.session(ctx, &rv, assign)
		}, backoff.WithClock(s.clock), backoff.WithRand(s.cfg.Rand), backoff.WithName(s.origin))
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("configmapsource: %s: %w", s.origin, err)
		}
	}
	return nil
}

// minWatch is how long a watch that delivered no event must have lasted
// for its end to count as normal. A watch that ends sooner with nothing
// (an EOF from a proxy or load balancer, a resourceVersion that expires
// again right after a list) is an error, so that Retry waits before the
// next one and keeps growing its wait until a watch delivers something.
const minWatch = time.Second

// errNoProgress is wrapped by session when its watch ended without an
// event before minWatch.
var errNoProgress = errors.New("watch ended with no event")

// session lists if rv is empty, then watches from rv until the watch ends.
// It returns nil when the watch ended normally or expired (rv is then ""),
// so the caller starts the next one at once, and an error wrapping
// errNoProgress when the watch ended at once having delivered nothing, so
// that a server or proxy that ends every watch at once is not asked again
// at once.
func (s *Source) session(ctx context.Context, rv *string, assign func(context.Context, []byte, checkpoint.Source)) error {
	log := logr.FromContextOrDiscard(ctx)
	cms := s.cfg.Client.CoreV1().ConfigMaps(s.cfg.Namespace)
	sel := fields.OneTermEqualSelector("metadata.name", s.cfg.Name).String()
	listed := *rv == ""
	if listed {
		s.request("list")
		list, err := cms.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return fmt.Errorf("list: %w", err)
		}
		if len(list.Items) == 0 {
			log.Info("configuration source not found; nothing assigned", "source", s.origin)
		}
		for i := range list.Items {
			s.deliver(ctx, &list.Items[i], assign)
		}
		*rv = list.ResourceVersion
	}
	timeout := s.cfg.WatchTimeout + time.Duration(jitter.Int64N(s.cfg.Rand, int64(s.cfg.WatchTimeout)/10+1))
	secs := int64(timeout / time.Second)
	s.request("watch")
	w, err := cms.Watch(ctx, metav1.ListOptions{
		FieldSelector: sel, ResourceVersion: *rv, AllowWatchBookmarks: true, TimeoutSeconds: &secs,
	})
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		log.V(1).Info("resourceVersion expired; listing again", "source", s.origin, "resourceVersion", *rv)
		from := *rv
		*rv = ""
		if listed {
			// Expired although it came from a list just now: listing
			// again at once would only repeat this.
			return fmt.Errorf("watch from the list's resourceVersion %s: %w: %w", from, errNoProgress, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("watch from resourceVersion %s: %w", *rv, err)
	}
	defer w.Stop()
	timer := s.clock.NewTimer(timeout)
	defer timer.Stop()
	start := s.clock.Now()
	delivered := false
	// ended judges a watch that ended: normal if it delivered a change (an
	// object, a deletion, a bookmark that moved rv) or lasted minWatch, no
	// progress otherwise.
	ended := func(how string) error {
		if delivered || s.clock.Since(start) >= minWatch {
			return nil // resume from rv (or list, if rv was reset)
		}
		return fmt.Errorf("%s after %v: %w", how, s.clock.Since(start), errNoProgress)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C():
			return nil // resume from rv
		case ev, ok := <-w.ResultChan():
			if !ok {
				return ended("the server ended the watch")
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				cm, ok := ev.Object.(*corev1.ConfigMap)
				if !ok {
					return fmt.Errorf("watch delivered %T", ev.Object)
				}
				*rv, delivered = cm.ResourceVersion, true
				s.deliver(ctx, cm, assign)
			case watch.Deleted:
				if m, err := meta.Accessor(ev.Object); err == nil {
					*rv = m.GetResourceVersion()
				}
				delivered = true
				log.Info("configuration source deleted; keeping the running configuration", "source", s.origin)
			case watch.Bookmark:
				// Progress only if it moves the resourceVersion: a
				// bookmark of where the watch began says nothing new.
				if m, err := meta.Accessor(ev.Object); err == nil && m.GetResourceVersion() != *rv {
					*rv, delivered = m.GetResourceVersion(), true
				}
			case watch.Error:
				err := apierrors.FromObject(ev.Object)
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					log.V(1).Info("resourceVersion expired; listing again", "source", s.origin, "resourceVersion", *rv)
					*rv = ""
					return ended("resourceVersion expired")
				}
				return fmt.Errorf("watch: %w", err)
			}
		}
	}
}

func (s *Source) request(verb string) {
	if s.cfg.OnRequest != nil {
		s.cfg.OnRequest(verb)
	}
}

// deliver passes the ConfigMap's payload on, if it has the key.
func (s *Source) deliver(ctx context.Context, cm *corev1.ConfigMap, assign func(context.Context, []byte, checkpoint.Source)) {
	src := checkpoint.Source{UID: string(cm.UID), ResourceVersion: cm.ResourceVersion, Origin: s.origin}
	if src.UID == "" || src.ResourceVersion == "" {
		// No stable identity (client-go's fake clientset sets neither):
		// the Controller names the payload by its hash.
		src.UID, src.ResourceVersion = "", ""
	}
	if v, ok := cm.Data[s.cfg.Key]; ok {
		assign(ctx, []byte(v), src)
		return
	}
	if v, ok := cm.BinaryData[s.cfg.Key]; ok {
		assign(ctx, append([]byte(nil), v...), src)
		return
	}
	logr.FromContextOrDiscard(ctx).Error(nil, "configuration source has no such key; nothing assigned",
		"source", s.origin, "resourceVersion", cm.ResourceVersion)
}
