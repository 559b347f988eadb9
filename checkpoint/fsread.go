package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/go-logr/logr"
)

// readState reads both copies of the state record, picks the newest intact
// one and repairs the other.
func (s *FSStore) readState(log logr.Logger) error {
	s.state, s.stateGen, s.stateErr, s.damaged = State{}, 0, nil, [2]bool{}
	var (
		best    = -1
		present int
		gens    [2]uint64
		states  [2]State
		errs    [2]error
	)
	for i, slot := range stateSlots {
		path := filepath.Join(s.dir, slot)
		data, err := s.fs.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			errs[i] = fmt.Errorf("%s: missing", path)
			continue
		case err != nil:
			// A directory in its place, an I/O error: this copy is lost.
			errs[i] = fmt.Errorf("%s: %w: %w", path, err, ErrCorrupt)
			s.damaged[i] = true
			present++
			continue
		}
		present++
		st, gen, err := decodeMeta(data)
		if err != nil {
			errs[i] = fmt.Errorf("%s: %w", path, err)
			s.damaged[i] = true
			continue
		}
		states[i], gens[i] = st, gen
		if best < 0 || gen > gens[best] {
			best = i
		}
	}
	if best < 0 && present == 0 {
		if st, ok := s.upgrade(log); ok {
			return s.writeState(st, log)
		}
	}
	switch {
	case best < 0 && present == 0 && len(s.index) == 0:
		// A fresh store: record that nothing is assigned.
		return s.writeState(State{}, log)
	case best < 0:
		s.stateErr = fmt.Errorf("state record lost, both copies unusable (%v; %v) while %d checkpoints exist: %w",
			errs[0], errs[1], len(s.index), ErrCorrupt)
		log.Error(s.stateErr, "checkpoint state unusable; assigned and last-known-good are unknown")
		return nil
	}
	s.state, s.stateGen = states[best], gens[best]
	other := 1 - best
	if errs[other] != nil || gens[other] != gens[best] {
		why := "outdated"
		if errs[other] != nil {
			why = errs[other].Error()
		}
		log.Info("repairing the second copy of the checkpoint state", "copy", stateSlots[other], "why", why)
		if err := s.writeState(s.state, log); err != nil {
			// The intact copy stands; the next update tries again.
			log.Error(err, "repairing the checkpoint state")
		}
	}
	return nil
}

// State implements [LKGStore].
func (s *FSStore) State(ctx context.Context) (State, error) {
	if err := ctx.Err(); err != nil {
		return State{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.ready {
		return State{}, fmt.Errorf("checkpoint: %s: %w", s.dir, ErrNotInitialized)
	}
	if s.stateErr != nil {
		return State{}, fmt.Errorf("checkpoint: %w", s.stateErr)
	}
	return s.state.clone(), nil
}

// Load implements [LKGStore]. It reads the whole file and verifies the
// header checksum, the payload size and the payload hash.
func (s *FSStore) Load(ctx context.Context, id string) (*Checkpoint, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.ready {
		return nil, fmt.Errorf("checkpoint: load %q: %w", id, ErrNotInitialized)
	}
	gen, ok := s.index[id]
	if !ok {
		return nil, s.missing(id, "")
	}
	path := filepath.Join(s.ckDir, fileName(gen, id))
	data, err := s.fs.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, s.missing(id, path)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: load %q: %w", id, err)
	}
	cp, fileGen, err := decodeCheckpoint(data)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: load %q from %s: %w", id, path, err)
	}
	if cp.ID != id || fileGen != gen {
		return nil, fmt.Errorf("checkpoint: load %q from %s: file holds %q generation %d: %w", id, path, cp.ID, fileGen, ErrCorrupt)
	}
	return cp, nil
}

// missing builds the error for a checkpoint that is not on disk. Missing
// while referenced by the state record, or with the directory gone, is
// corruption, not just absence.
func (s *FSStore) missing(id, path string) error {
	if _, err := s.fs.Stat(s.dir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checkpoint: load %q: store directory %s has disappeared: %w", id, s.dir, ErrNotInitialized)
	}
	role := ""
	switch id {
	case s.state.Assigned:
		role = "assigned"
	case s.state.Active:
		role = "active"
	case s.state.LastKnownGood:
		role = "last-known-good"
	}
	switch {
	case role == "":
		return fmt.Errorf("checkpoint: load %q: %w", id, ErrNotFound)
	case path == "" && s.lost != nil:
		return fmt.Errorf("checkpoint: load %q: the %s checkpoint has no file: %w: %w", id, role, s.lost, ErrNotFound)
	case path == "":
		return fmt.Errorf("checkpoint: load %q: the %s checkpoint has no file in %s: %w: %w", id, role, s.ckDir, ErrCorrupt, ErrNotFound)
	default:
		return fmt.Errorf("checkpoint: load %q: the %s checkpoint's file %s is missing: %w: %w", id, role, path, ErrCorrupt, ErrNotFound)
	}
}
