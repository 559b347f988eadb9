package ccm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cenkalti/backoff/v4"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/reconkit/reconkit/lbrecon"
)

// Labels and annotation of a [ConfigMapJournal]'s ConfigMaps.
const (
	// JournalServiceLabel holds the Service's UID.
	JournalServiceLabel = "lbrecon.reconkit.io/service-uid"
	// JournalScopeLabel holds a hash of the load-balancer ID (IDs need
	// not be label values).
	JournalScopeLabel = "lbrecon.reconkit.io/scope"
	// JournalScopeAnnotation holds the load-balancer ID itself.
	JournalScopeAnnotation = "lbrecon.reconkit.io/load-balancer-id"
	// journalKey is the ConfigMap data key of the intents.
	journalKey = "intents"
)

// DefaultShardBytes is a [ConfigMapJournal] shard's size bound when
// ConfigMapJournalOptions.ShardBytes is zero: half the apiserver's 1 MiB
// bound on a ConfigMap's data.
const DefaultShardBytes = 512 << 10

// journalStaleReads bounds the reads of one journal write that find the
// scope's shards as the read before found them: a conflict with no other
// writer's change behind it. A read that finds them changed (another
// writer got through, or an operator deleted a shard) is progress and
// starts the count again, so a busy writer delays a write but never
// makes it give up, and a server answering 409 for ever costs at most
// this many reads.
const journalStaleReads = 3

// ConfigMapJournalOptions configures a [ConfigMapJournal].
type ConfigMapJournalOptions struct {
	// ShardBytes bounds the encoded intents one ConfigMap holds; more go
	// to further ConfigMaps. Zero means DefaultShardBytes. Keep it well
	// below 1 MiB, the apiserver's bound.
	ShardBytes int
}

// ConfigMapJournal is a [Journal] in ConfigMaps of the Service's
// namespace, owned by the Service (an ownerReference, so the garbage
// collector removes them once the Service is gone), never in the Service
// itself: a journal write neither re-queues the Service in the service
// controller nor reaches kube-proxy, and the Service's own size bound
// (256 KiB of annotations) does not apply. Each Service and load-balancer
// ID has its own shards, ConfigMaps named "lbrecon-journal-<hash>-<n>"
// and labelled with JournalServiceLabel and JournalScopeLabel, each
// holding at most ShardBytes of intents as JSON
// {"version":1,"intents":[...]}; a 5,000-node Service with 4 ports (about
// 20,000 intents in flight at once) takes 10 shards. An emptied
// shard is deleted.
//
// Every write is a Create, an Update preconditioned on the
// resourceVersion it read, or a Delete preconditioned the same way; on a
// conflict it reads the scope's shards again and retries, for as long as
// each read finds them changed since the one before (another writer's
// progress), and gives up after 3 reads in a row that find them as they
// were. Reads are LISTs without a resourceVersion (served from etcd,
// never from a cache). An intent is durable once Record returns. The
// apiserver refusing a write as invalid, too large or forbidden is an
// [ErrJournalRefused] error marked permanent, which says what to do.
//
// A shard deleted by someone else (an operator, a namespace's deletion)
// loses no intent this process recorded and has not forgotten: each scope
// keeps them in memory, and every read puts back those it does not find,
// so the scope's next write (Record or Forget) writes them again, and
// Load, which begins every leadership term, returns them. Between the
// deletion and that write a successor would not find them. In a
// namespace being deleted that write is refused (ErrJournalRefused), and
// the Service goes with its namespace.
//
// RBAC: get, list, create, update and delete on configmaps in the
// namespaces of the Services the cloud-controller-manager serves.
//
// It is safe for concurrent use.
type ConfigMapJournal struct {
	client     corev1client.ConfigMapsGetter
	shardBytes int
}

var _ Journal = (*ConfigMapJournal)(nil)

// NewConfigMapJournal returns a journal kept in ConfigMaps through client.
func NewConfigMapJournal(client corev1client.ConfigMapsGetter, opts ConfigMapJournalOptions) *ConfigMapJournal {
	if opts.ShardBytes <= 0 {
		opts.ShardBytes = DefaultShardBytes
	}
	return &ConfigMapJournal{client: client, shardBytes: opts.ShardBytes}
}

// For implements [Journal].
func (j *ConfigMapJournal) For(svc *v1.Service, id string) lbrecon.Journal {
	sum := sha256.Sum256([]byte(string(svc.UID) + "\x00" + id))
	hash := hex.EncodeToString(sum[:8])
	return &cmScope{j: j, ns: svc.Namespace, svc: svc.Name, uid: svc.UID, id: id, hash: hash}
}

// Scopes implements [Journal]: one LIST of the Service's shards.
func (j *ConfigMapJournal) Scopes(ctx context.Context, svc *v1.Service) (map[string]int, error) {
	list, err := j.client.ConfigMaps(svc.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{JournalServiceLabel: string(svc.UID)}.String()})
	if err != nil {
		return nil, fmt.Errorf("ccm: list the intent journal of service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	out := map[string]int{}
	for i := range list.Items {
		cm := &list.Items[i]
		intents, err := decodeShard(cm)
		if err != nil {
			return nil, err
		}
		if len(intents) > 0 {
			out[cm.Annotations[JournalScopeAnnotation]] += len(intents)
		}
	}
	return out, nil
}

// shardValue is a shard's data.
type shardValue struct {
	Version int              `json:"version"`
	Intents []lbrecon.Intent `json:"intents"`
}

// decodeShard returns the intents of shard cm, or an
// lbrecon.ErrCorruptJournal error naming it.
func decodeShard(cm *v1.ConfigMap) ([]lbrecon.Intent, error) {
	corrupt := func(format string, a ...any) error {
		return fmt.Errorf("%w: ConfigMap %s/%s: %s (delete it once the load balancer it journals is known)",
			lbrecon.ErrCorruptJournal, cm.Namespace, cm.Name, fmt.Sprintf(format, a...))
	}
	s, ok := cm.Data[journalKey]
	if !ok {
		return nil, corrupt("no %q key", journalKey)
	}
	var v shardValue
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, corrupt("%v", err)
	}
	if v.Version != 1 {
		return nil, corrupt("version %d, want 1", v.Version)
	}
	for i, in := range v.Intents {
		if in.Kind == "" || in.Name == "" || in.At.IsZero() {
			return nil, corrupt("intent %d lacks a kind, name or time", i)
		}
	}
	return v.Intents, nil
}

// cmScope is the journal of one Service's load balancer: its shards.
type cmScope struct {
	j                 *ConfigMapJournal
	ns, svc, id, hash string
	uid               types.UID

	mu     sync.Mutex
	shards map[string]*shard // by ConfigMap name, as last read or written, plus held intents put back; nil before a read
	// held are the intents this process recorded and has not forgotten,
	// by kind and name: a read that does not find one puts it back.
	held map[[3]string]lbrecon.Intent
	// dirty are the shards changed in memory since the last write (held
	// intents put back by a read): the next write writes them too.
	dirty map[string]bool
}

// shard is one ConfigMap's intents.
type shard struct {
	rv      string
	intents map[[3]string]lbrecon.Intent
	size    map[[3]string]int // encoded size of each intent
	total   int               // encoded size of the shard's value, about
}

func newShard(rv string) *shard {
	return &shard{rv: rv, intents: map[[3]string]lbrecon.Intent{}, size: map[[3]string]int{}, total: 32}
}

func (s *shard) put(k [3]string, in lbrecon.Intent, size int) {
	s.remove(k)
	s.intents[k], s.size[k] = in, size
	s.total += size + 1
}

func (s *shard) remove(k [3]string) {
	if n, ok := s.size[k]; ok {
		delete(s.intents, k)
		delete(s.size, k)
		s.total -= n + 1
	}
}

var _ lbrecon.Journal = (*cmScope)(nil)

// Load implements lbrecon.Journal.
func (s *cmScope) Load(ctx context.Context) ([]lbrecon.Intent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.read(ctx); err != nil {
		return nil, err
	}
	s.dirty = s.restore()
	var out []lbrecon.Intent
	for _, sh := range s.shards {
		for _, in := range sh.intents {
			out = append(out, in)
		}
	}
	return out, nil
}

// Record implements lbrecon.Journal: the intents are in etcd when it
// returns nil.
func (s *cmScope) Record(ctx context.Context, intents []lbrecon.Intent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sizes := make([]int, len(intents))
	for i, in := range intents {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("ccm: encode intent %s/%s: %w", in.Kind, in.Name, err)
		}
		if sizes[i] = len(b); sizes[i]+64 > s.j.shardBytes {
			return backoff.Permanent(fmt.Errorf("%w: intent %s/%s takes %d bytes, more than a shard's %d: raise ConfigMapJournalOptions.ShardBytes",
				ErrJournalRefused, in.Kind, in.Name, sizes[i], s.j.shardBytes))
		}
	}
	if err := s.change(ctx, func() map[string]bool { return s.place(intents, sizes) }); err != nil {
		return err
	}
	if s.held == nil {
		s.held = map[[3]string]lbrecon.Intent{}
	}
	for _, in := range intents {
		s.held[[3]string{in.Kind, in.Name, in.ID}] = in
	}
	return nil
}

// place puts intents, of encoded sizes sizes, in the shards: in place of
// one of the same kind and name, else in the first shard with room, else
// in a new one. It returns the shards it changed. Called with mu held.
func (s *cmScope) place(intents []lbrecon.Intent, sizes []int) map[string]bool {
	changed := map[string]bool{}
	var rest []int
	for i, in := range intents {
		k := [3]string{in.Kind, in.Name, in.ID}
		placed := false
		for name, sh := range s.shards {
			if _, ok := sh.intents[k]; ok {
				changed[name] = true
				if sh.total-sh.size[k]+sizes[i] <= s.j.shardBytes {
					sh.put(k, in, sizes[i])
					placed = true
				} else {
					sh.remove(k) // grown past the bound: placed below
				}
				break
			}
		}
		if !placed {
			rest = append(rest, i)
		}
	}
	names := make([]string, 0, len(s.shards))
	for name := range s.shards {
		names = append(names, name)
	}
	slices.Sort(names)
	next := 0
	for _, i := range rest {
		k := [3]string{intents[i].Kind, intents[i].Name, intents[i].ID}
		for {
			if next == len(names) {
				name := s.newShardName()
				s.shards[name] = newShard("")
				names = append(names, name)
			}
			sh := s.shards[names[next]]
			if sh.total+sizes[i]+1 <= s.j.shardBytes {
				sh.put(k, intents[i], sizes[i])
				changed[names[next]] = true
				break
			}
			next++
		}
	}
	return changed
}

// restore puts back in the shards the held intents they lack (a shard
// deleted by someone else) and returns the shards it changed. Called
// with mu held, after a read.
func (s *cmScope) restore() map[string]bool {
	var missing []lbrecon.Intent
	var sizes []int
	for k, in := range s.held {
		found := false
		for _, sh := range s.shards {
			if _, found = sh.intents[k]; found {
				break
			}
		}
		if found {
			continue
		}
		if b, err := json.Marshal(in); err == nil { // encoded once by Record
			missing, sizes = append(missing, in), append(sizes, len(b))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return s.place(missing, sizes)
}

// Forget implements lbrecon.Journal; an emptied shard is deleted.
func (s *cmScope) Forget(ctx context.Context, intents []lbrecon.Intent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range intents {
		delete(s.held, [3]string{in.Kind, in.Name, in.ID})
	}
	return s.change(ctx, func() map[string]bool {
		changed := map[string]bool{}
		for _, in := range intents {
			k := [3]string{in.Kind, in.Name, in.ID}
			for name, sh := range s.shards {
				if _, ok := sh.intents[k]; ok {
					sh.remove(k)
					changed[name] = true
				}
			}
		}
		return changed
	})
}

// newShardName returns the name of a shard not in s.shards.
func (s *cmScope) newShardName() string {
	for n := 0; ; n++ {
		name := "lbrecon-journal-" + s.hash + "-" + strconv.Itoa(n)
		if _, ok := s.shards[name]; !ok {
			return name
		}
	}
}

// change applies edit to the shards (read first when not known) and
// writes the shards it changed; on a conflict it reads them all again
// and retries, until journalStaleReads reads in a row find them
// unchanged. Called with mu held.
func (s *cmScope) change(ctx context.Context, edit func() map[string]bool) error {
	last := s.versions() // as the last read found them
	stale := 0           // reads in a row that found them as the one before
	for {
		if s.shards == nil {
			if err := s.read(ctx); err != nil {
				return err
			}
			if v := s.versions(); v != last {
				last, stale = v, 0 // another writer got through: progress
			} else {
				stale++
			}
			s.dirty = s.restore()
		}
		changed := edit()
		for name := range s.dirty {
			if _, ok := s.shards[name]; ok {
				changed[name] = true
			}
		}
		names := make([]string, 0, len(changed))
		for name := range changed {
			names = append(names, name)
		}
		slices.Sort(names)
		var err error
		for _, name := range names {
			if err = s.write(ctx, name); err != nil {
				break
			}
		}
		switch {
		case err == nil:
			s.dirty = nil
			return nil
		case ctx.Err() != nil:
			s.shards = nil
			return fmt.Errorf("ccm: write the intent journal of service %s/%s: %w", s.ns, s.svc, err)
		case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err), apierrors.IsNotFound(err):
			s.shards = nil // changed since: read again
			if stale >= journalStaleReads {
				return fmt.Errorf("ccm: write the intent journal of service %s/%s: %d reads without another writer's change, each write refused; retrying later: %w",
					s.ns, s.svc, journalStaleReads, err)
			}
			continue
		}
		s.shards = nil // a write may have been applied: read before the next one
		return s.refused(firstOf(names), err)
	}
}

// versions describes the shards as last read or written: their names and
// resourceVersions. Called with mu held.
func (s *cmScope) versions() string {
	if s.shards == nil {
		return "unread"
	}
	names := make([]string, 0, len(s.shards))
	for name, sh := range s.shards {
		names = append(names, name+"@"+sh.rv)
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

func firstOf(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// refused wraps a write's error, permanent when waiting cannot cure it.
func (s *cmScope) refused(cm string, err error) error {
	switch {
	case apierrors.IsInvalid(err), apierrors.IsRequestEntityTooLargeError(err):
		return backoff.Permanent(fmt.Errorf("%w: the apiserver refused ConfigMap %s/%s of the intent journal of service %s: %w; "+
			"lower ConfigMapJournalOptions.ShardBytes below the apiserver's object size limit, or allow the ConfigMap through the admission policy that refused it",
			ErrJournalRefused, s.ns, cm, s.svc, err))
	case apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause):
		return backoff.Permanent(fmt.Errorf("%w: the intent journal of service %s/%s: %w; its namespace is being deleted, and the service with it",
			ErrJournalRefused, s.ns, s.svc, err))
	case apierrors.IsForbidden(err):
		return backoff.Permanent(fmt.Errorf("%w: the intent journal of service %s/%s: %w; "+
			"grant the cloud-controller-manager get, list, create, update and delete on configmaps in namespace %s",
			ErrJournalRefused, s.ns, s.svc, err, s.ns))
	}
	return fmt.Errorf("ccm: write the intent journal of service %s/%s: %w", s.ns, s.svc, err)
}

// write stores shard name: Delete when empty, Create when new, Update
// otherwise, each preconditioned on the resourceVersion read. Called with
// mu held.
func (s *cmScope) write(ctx context.Context, name string) error {
	sh := s.shards[name]
	cms := s.j.client.ConfigMaps(s.ns)
	if len(sh.intents) == 0 {
		delete(s.shards, name)
		if sh.rv == "" {
			return nil // never written
		}
		rv := sh.rv
		err := cms.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	v := shardValue{Version: 1, Intents: make([]lbrecon.Intent, 0, len(sh.intents))}
	for _, in := range sh.intents {
		v.Intents = append(v.Intents, in)
	}
	slices.SortFunc(v.Intents, func(a, b lbrecon.Intent) int {
		if c := cmpString(a.Kind, b.Kind); c != 0 {
			return c
		}
		return cmpString(a.Name, b.Name)
	})
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("ccm: encode the intent journal: %w", err)
	}
	ctrl := false
	cm := &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns, ResourceVersion: sh.rv,
			Labels:      map[string]string{JournalServiceLabel: string(s.uid), JournalScopeLabel: s.hash},
			Annotations: map[string]string{JournalScopeAnnotation: s.id},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: s.svc, UID: s.uid,
				Controller: &ctrl}}},
		Data: map[string]string{journalKey: string(data)},
	}
	var got *v1.ConfigMap
	if sh.rv == "" {
		got, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	} else {
		got, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return err
	}
	sh.rv = got.ResourceVersion
	return nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// read LISTs the scope's shards (a linearizable read). Called with mu
// held.
func (s *cmScope) read(ctx context.Context) error {
	list, err := s.j.client.ConfigMaps(s.ns).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{JournalServiceLabel: string(s.uid), JournalScopeLabel: s.hash}.String()})
	if err != nil {
		return fmt.Errorf("ccm: read the intent journal of service %s/%s: %w", s.ns, s.svc, err)
	}
	shards := map[string]*shard{}
	for i := range list.Items {
		cm := &list.Items[i]
		if cm.Annotations[JournalScopeAnnotation] != s.id {
			continue // another ID with the same hash: not this scope
		}
		intents, err := decodeShard(cm)
		if err != nil {
			return err
		}
		sh := newShard(cm.ResourceVersion)
		for _, in := range intents {
			b, err := json.Marshal(in)
			if err != nil {
				return fmt.Errorf("ccm: encode intent %s/%s: %w", in.Kind, in.Name, err)
			}
			sh.put([3]string{in.Kind, in.Name, in.ID}, in, len(b))
		}
		shards[cm.Name] = sh
	}
	s.shards = shards
	return nil
}
