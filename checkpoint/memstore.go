package checkpoint

import (
	"bytes"
	"context"
	"fmt"
	"sync"
)

// MemStore is an [LKGStore] in memory, for tests and for hosts that need no
// persistence. Its zero value is ready for use. It keeps every checkpoint
// (no history bound) and loses everything with the process; it cannot be
// corrupted, so it never returns [ErrCorrupt] from Load.
type MemStore struct {
	mu          sync.Mutex
	checkpoints map[string]Checkpoint
	state       State
}

var _ LKGStore = (*MemStore)(nil)

// Initialize implements [LKGStore].
func (s *MemStore) Initialize(ctx context.Context) error {
	return ctx.Err()
}

// State implements [LKGStore].
func (s *MemStore) State(ctx context.Context) (State, error) {
	if err := ctx.Err(); err != nil {
		return State{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.clone(), nil
}

// Load implements [LKGStore].
func (s *MemStore) Load(ctx context.Context, id string) (*Checkpoint, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cp, ok := s.checkpoints[id]
	if !ok {
		return nil, fmt.Errorf("checkpoint: load %q: %w", id, ErrNotFound)
	}
	cp.Payload = bytes.Clone(cp.Payload)
	if cp.Payload == nil {
		cp.Payload = []byte{}
	}
	return &cp, nil
}

// Save implements [LKGStore].
func (s *MemStore) Save(ctx context.Context, cp Checkpoint) error {
	cp, err := prepare(cp)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.checkpoints[cp.ID]; ok {
		if old.Hash != cp.Hash {
			return fmt.Errorf("checkpoint: save %q: %w", cp.ID, ErrConflict)
		}
		return nil
	}
	if s.checkpoints == nil {
		s.checkpoints = make(map[string]Checkpoint)
	}
	s.checkpoints[cp.ID] = cp
	return nil
}

// SetState implements [LKGStore].
func (s *MemStore) SetState(ctx context.Context, st State) error {
	if err := st.Validate(); err != nil {
		return fmt.Errorf("checkpoint: set state: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range st.refs() {
		if _, ok := s.checkpoints[id]; id != "" && !ok {
			return fmt.Errorf("checkpoint: set state: checkpoint %q: %w", id, ErrNotFound)
		}
	}
	s.state = st.clone()
	return nil
}
