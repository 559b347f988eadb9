package checkpoint

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"
)

// MemStore is an [LKGStore] in memory, for tests and for hosts that need no
// persistence. Its zero value is ready for use. It keeps every checkpoint
// (no history bound) and loses everything with the process; it cannot be
// corrupted, so it never returns [ErrCorrupt] from Load.
type MemStore struct {
	mu          sync.Mutex
	checkpoints map[string]Checkpoint
	current     string
	lkg         string
	currentAt   time.Time
}

var _ LKGStore = (*MemStore)(nil)

// Initialize implements [LKGStore].
func (s *MemStore) Initialize(ctx context.Context) error {
	return ctx.Err()
}

// Current implements [LKGStore].
func (s *MemStore) Current(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current, nil
}

// LastKnownGood implements [LKGStore].
func (s *MemStore) LastKnownGood(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lkg, nil
}

// CurrentSetAt implements [LKGStore].
func (s *MemStore) CurrentSetAt(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.currentAt, nil
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

// SetCurrent implements [LKGStore].
func (s *MemStore) SetCurrent(ctx context.Context, id string, at time.Time) error {
	if err := s.checkRef(ctx, id); err != nil {
		return fmt.Errorf("checkpoint: set current: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.current, s.currentAt = id, at
	return nil
}

// SetLastKnownGood implements [LKGStore].
func (s *MemStore) SetLastKnownGood(ctx context.Context, id string) error {
	if err := s.checkRef(ctx, id); err != nil {
		return fmt.Errorf("checkpoint: set last-known-good: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lkg = id
	return nil
}

// Reset implements [LKGStore].
func (s *MemStore) Reset(ctx context.Context) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := s.current != ""
	s.current, s.lkg, s.currentAt = "", "", time.Time{}
	return changed, nil
}

func (s *MemStore) checkRef(ctx context.Context, id string) error {
	if err := validateRef(id); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if id == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.checkpoints[id]; !ok {
		return fmt.Errorf("%q: %w", id, ErrNotFound)
	}
	return nil
}
