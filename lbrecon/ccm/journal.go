package ccm

import (
	"context"
	"errors"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/reconkit/reconkit/lbrecon"
)

// ErrJournalRefused is wrapped (with backoff.Permanent) when the apiserver
// refuses a journal write for good: as invalid (422), too large (413) or
// forbidden (403). The error says what to do; the call is not retried
// before the service controller's backoff.
var ErrJournalRefused = errors.New("ccm: intent journal write refused")

// Journal keeps the intents of every Service's load balancers (the
// creations lbrecon is about to send, see lbrecon.Journal) where they
// survive the process, one lbrecon journal per Service and load-balancer
// ID, so that reconcilers of two IDs of one Service (a move) never share
// entries. [ConfigMapJournal] is the crash-safe one; [MemoryJournal] is
// the explicit choice of none. Its methods are called concurrently, for
// different Services, and must honour their context.
type Journal interface {
	// For returns the journal of svc's load balancer id. It makes no call.
	For(svc *v1.Service, id string) lbrecon.Journal
	// Scopes returns, for every load-balancer ID with intents recorded
	// for svc (by UID), how many. A Service without intents has none.
	Scopes(ctx context.Context, svc *v1.Service) (map[string]int, error)
}

// MemoryJournal is a [Journal] in this process's memory: it outlives a
// Balancer but not the process. Choosing it is choosing no journal: a
// cloud-controller-manager restarted (or failed over) right after a
// creation its provider's listing does not show yet creates the object
// again, and a Service deleted then may leave it behind. For tests, and
// for providers whose listings never lag. The zero value is ready; it is
// safe for concurrent use.
type MemoryJournal struct {
	mu      sync.Mutex
	intents map[types.UID]map[string]map[[3]string]lbrecon.Intent // by Service UID, load-balancer ID, kind, name and ID (a destruction's)
}

var _ Journal = (*MemoryJournal)(nil)

// For implements [Journal].
func (m *MemoryJournal) For(svc *v1.Service, id string) lbrecon.Journal {
	return memoryScope{m: m, uid: svc.UID, id: id}
}

// Scopes implements [Journal].
func (m *MemoryJournal) Scopes(_ context.Context, svc *v1.Service) (map[string]int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for id, in := range m.intents[svc.UID] {
		if len(in) > 0 {
			out[id] = len(in)
		}
	}
	return out, nil
}

type memoryScope struct {
	m   *MemoryJournal
	uid types.UID
	id  string
}

func (s memoryScope) Load(context.Context) ([]lbrecon.Intent, error) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	var out []lbrecon.Intent
	for _, in := range s.m.intents[s.uid][s.id] {
		out = append(out, in)
	}
	return out, nil
}

func (s memoryScope) Record(_ context.Context, intents []lbrecon.Intent) error {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if s.m.intents == nil {
		s.m.intents = map[types.UID]map[string]map[[3]string]lbrecon.Intent{}
	}
	if s.m.intents[s.uid] == nil {
		s.m.intents[s.uid] = map[string]map[[3]string]lbrecon.Intent{}
	}
	if s.m.intents[s.uid][s.id] == nil {
		s.m.intents[s.uid][s.id] = map[[3]string]lbrecon.Intent{}
	}
	for _, in := range intents {
		s.m.intents[s.uid][s.id][[3]string{in.Kind, in.Name, in.ID}] = in
	}
	return nil
}

func (s memoryScope) Forget(_ context.Context, intents []lbrecon.Intent) error {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	scope := s.m.intents[s.uid][s.id]
	for _, in := range intents {
		delete(scope, [3]string{in.Kind, in.Name, in.ID})
	}
	if len(scope) == 0 {
		delete(s.m.intents[s.uid], s.id)
		if len(s.m.intents[s.uid]) == 0 {
			delete(s.m.intents, s.uid)
		}
	}
	return nil
}
