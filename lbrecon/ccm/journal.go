package ccm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/reconkit/reconkit/lbrecon"
)

// DefaultJournalAnnotation is the Service annotation a [ServiceJournal]
// keeps its intents in when none is given.
const DefaultJournalAnnotation = "lbrecon.reconkit.io/create-pending"

// ErrServiceGone is wrapped by [ServiceJournal.Record] when the Service is
// gone or was replaced by another of the same name (another UID): no
// intent can be recorded, so no creation is sent.
var ErrServiceGone = errors.New("ccm: service gone or replaced")

// maxConflicts bounds the attempts of one journal write against
// concurrent changes of the Service.
const maxConflicts = 5

// ServiceJournal is an lbrecon.Journal kept in one annotation of a
// Service, as crossplane keeps its create-pending annotations: every
// change is a JSON merge patch of that annotation alone, preconditioned
// on the resourceVersion of the Service it read, so the server refuses it
// when anything changed the Service since; on that refusal it reads the
// Service again and retries (at most 5 attempts). Reads are GETs without a
// resourceVersion (served from etcd, never from a cache). A patch the
// server applied is in etcd, so an intent is durable once Record returns;
// a crash before the answer leaves the annotation as it was, or with the
// intents, never half of them. The annotation holds JSON
// {"version":1,"intents":[...]}; the apiserver bounds a Service's
// annotations to 256 KiB, about a thousand intents. It belongs to one
// Service (namespace, name and UID) and one reconciler; a Service
// replaced by one of the same name is not its Service. It is safe for
// concurrent use.
type ServiceJournal struct {
	client        corev1client.ServicesGetter
	ns, name, key string
	uid           types.UID

	mu      sync.Mutex
	rv      string                       // resourceVersion the intents were read or written at; "" before a read
	intents map[[2]string]lbrecon.Intent // by kind and name, as of rv
}

var _ lbrecon.Journal = (*ServiceJournal)(nil)

// NewServiceJournal returns the journal of svc (its namespace, name and
// UID) in the annotation key (DefaultJournalAnnotation when empty).
func NewServiceJournal(client corev1client.ServicesGetter, svc *v1.Service, key string) *ServiceJournal {
	if key == "" {
		key = DefaultJournalAnnotation
	}
	return &ServiceJournal{client: client, ns: svc.Namespace, name: svc.Name, uid: svc.UID, key: key}
}

// ServiceJournals returns a Config.Journal that keeps each Service's
// intents in its annotation key (DefaultJournalAnnotation when empty).
func ServiceJournals(client corev1client.ServicesGetter, key string) func(*v1.Service) lbrecon.Journal {
	return func(svc *v1.Service) lbrecon.Journal { return NewServiceJournal(client, svc, key) }
}

type journalValue struct {
	Version int              `json:"version"`
	Intents []lbrecon.Intent `json:"intents"`
}

// Load implements lbrecon.Journal. A Service that is gone or replaced has
// no intents: its journal went with it.
func (j *ServiceJournal) Load(ctx context.Context) ([]lbrecon.Intent, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.read(ctx); err != nil {
		if errors.Is(err, ErrServiceGone) {
			return nil, nil
		}
		return nil, err
	}
	out := make([]lbrecon.Intent, 0, len(j.intents))
	for _, in := range j.intents {
		out = append(out, in)
	}
	return out, nil
}

// Record implements lbrecon.Journal: the intents are in etcd when it
// returns nil.
func (j *ServiceJournal) Record(ctx context.Context, intents []lbrecon.Intent) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.change(ctx, func(m map[[2]string]lbrecon.Intent) {
		for _, in := range intents {
			m[[2]string{in.Kind, in.Name}] = in
		}
	})
}

// Forget implements lbrecon.Journal. Forgetting on a Service that is gone
// is done.
func (j *ServiceJournal) Forget(ctx context.Context, intents []lbrecon.Intent) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	err := j.change(ctx, func(m map[[2]string]lbrecon.Intent) {
		for _, in := range intents {
			delete(m, [2]string{in.Kind, in.Name})
		}
	})
	if errors.Is(err, ErrServiceGone) {
		return nil
	}
	return err
}

// change applies edit to the intents and patches the annotation,
// preconditioned on the resourceVersion they were read at; on a conflict
// it reads again and retries. Called with mu held.
func (j *ServiceJournal) change(ctx context.Context, edit func(map[[2]string]lbrecon.Intent)) error {
	var err error
	for range maxConflicts {
		if j.rv == "" {
			if err := j.read(ctx); err != nil {
				return err
			}
		}
		next := make(map[[2]string]lbrecon.Intent, len(j.intents))
		for k, in := range j.intents {
			next[k] = in
		}
		edit(next)
		if len(next) == len(j.intents) && same(next, j.intents) {
			return nil
		}
		var rv string
		rv, err = j.patch(ctx, next)
		switch {
		case err == nil:
			j.rv, j.intents = rv, next
			return nil
		case apierrors.IsConflict(err):
			j.rv = "" // changed since: read again
		case apierrors.IsNotFound(err):
			return fmt.Errorf("%w: %s/%s: %w", ErrServiceGone, j.ns, j.name, err)
		default:
			j.rv = "" // the patch may have been applied: read before the next one
			return fmt.Errorf("ccm: write intent journal of service %s/%s: %w", j.ns, j.name, err)
		}
	}
	return fmt.Errorf("ccm: write intent journal of service %s/%s: %d conflicts: %w", j.ns, j.name, maxConflicts, err)
}

func same(a, b map[[2]string]lbrecon.Intent) bool {
	for k, in := range a {
		if o, ok := b[k]; !ok || o != in {
			return false
		}
	}
	return true
}

// read GETs the Service (a linearizable read) and loads the intents.
// Called with mu held.
func (j *ServiceJournal) read(ctx context.Context) error {
	svc, err := j.client.Services(j.ns).Get(ctx, j.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %s/%s: %w", ErrServiceGone, j.ns, j.name, err)
	}
	if err != nil {
		return fmt.Errorf("ccm: read intent journal of service %s/%s: %w", j.ns, j.name, err)
	}
	if svc.UID != j.uid {
		return fmt.Errorf("%w: %s/%s has UID %s, the journal's is %s", ErrServiceGone, j.ns, j.name, svc.UID, j.uid)
	}
	m := make(map[[2]string]lbrecon.Intent)
	if s, ok := svc.Annotations[j.key]; ok {
		var v journalValue
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return fmt.Errorf("%w: annotation %s of service %s/%s: %w", lbrecon.ErrCorruptJournal, j.key, j.ns, j.name, err)
		}
		if v.Version != 1 {
			return fmt.Errorf("%w: annotation %s of service %s/%s: version %d, want 1", lbrecon.ErrCorruptJournal, j.key, j.ns, j.name, v.Version)
		}
		for i, in := range v.Intents {
			if in.Kind == "" || in.Name == "" || in.At.IsZero() {
				return fmt.Errorf("%w: annotation %s of service %s/%s: intent %d lacks a kind, name or time", lbrecon.ErrCorruptJournal, j.key, j.ns, j.name, i)
			}
			m[[2]string{in.Kind, in.Name}] = in
		}
	}
	j.rv, j.intents = svc.ResourceVersion, m
	return nil
}

// patch writes intents into the annotation (removing it when empty) with
// a merge patch preconditioned on j.rv, and returns the new
// resourceVersion. Called with mu held.
func (j *ServiceJournal) patch(ctx context.Context, intents map[[2]string]lbrecon.Intent) (string, error) {
	var value any // null removes the annotation
	if len(intents) > 0 {
		v := journalValue{Version: 1, Intents: make([]lbrecon.Intent, 0, len(intents))}
		for _, in := range intents {
			v.Intents = append(v.Intents, in)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return "", fmt.Errorf("ccm: encode intent journal: %w", err)
		}
		value = string(b)
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": j.rv,
		"uid":             j.uid,
		"annotations":     map[string]any{j.key: value},
	}})
	if err != nil {
		return "", fmt.Errorf("ccm: encode intent journal patch: %w", err)
	}
	svc, err := j.client.Services(j.ns).Patch(ctx, j.name, types.MergePatchType, body, metav1.PatchOptions{})
	if err != nil {
		return "", err
	}
	return svc.ResourceVersion, nil
}
