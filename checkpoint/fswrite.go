package checkpoint

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"slices"

	"github.com/go-logr/logr"
)

// Save implements [LKGStore]. It prunes history beyond MaxGenerations, then
// writes the checkpoint to a temporary file in the checkpoints directory,
// fsyncs it, renames it into place and fsyncs the directory, which also
// makes the pruning durable.
func (s *FSStore) Save(ctx context.Context, cp Checkpoint) error {
	cp, err := prepare(cp)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ready {
		return fmt.Errorf("checkpoint: save %q: %w", cp.ID, ErrNotInitialized)
	}
	if err := s.flush(); err != nil {
		return fmt.Errorf("checkpoint: save %q: %w", cp.ID, err)
	}
	oldGen, exists := s.index[cp.ID]
	if exists {
		same, err := s.sameContent(cp, oldGen)
		if err != nil {
			return err
		}
		if same {
			return nil
		}
	}
	log := logr.FromContextOrDiscard(ctx)
	if !exists {
		s.prune(cp.ID, log)
	}
	gen := s.maxGen + 1
	renamed, err := s.writeFileAtomic(s.ckDir, fileName(gen, cp.ID), encodeCheckpoint(cp, gen))
	if renamed {
		// The file is in place, durable or not: memory follows the disk,
		// and the next write retries the directory fsync first.
		s.maxGen = gen
		s.index[cp.ID] = gen
		if exists {
			// The old file was damaged; the new one replaces it.
			if err := s.fs.Remove(filepath.Join(s.ckDir, fileName(oldGen, cp.ID))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				log.Error(err, "removing replaced damaged checkpoint", "id", cp.ID)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("checkpoint: save %q: %w", cp.ID, err)
	}
	return nil
}

// sameContent reports whether the stored checkpoint id equals cp. A stored
// checkpoint that no longer verifies may be replaced; an intact one with
// another payload is a conflict.
func (s *FSStore) sameContent(cp Checkpoint, gen uint64) (bool, error) {
	data, err := s.fs.ReadFile(filepath.Join(s.ckDir, fileName(gen, cp.ID)))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checkpoint: save %q: read existing: %w", cp.ID, err)
	}
	old, _, err := decodeCheckpoint(data)
	if err != nil {
		return false, nil
	}
	if old.Hash != cp.Hash {
		return false, fmt.Errorf("checkpoint: save %q: stored %s, new %s: %w", cp.ID, old.Hash, cp.Hash, ErrConflict)
	}
	return true, nil
}

// prune deletes the oldest checkpoints so that, with the one about to be
// saved, at most maxGens remain; it spares what the state record refers to
// and keep. The removals become durable with the directory fsync of the
// save that follows; a removal lost to a power loss only leaves history.
func (s *FSStore) prune(keep string, log logr.Logger) {
	excess := len(s.index) + 1 - s.maxGens
	if excess <= 0 || s.stateErr != nil {
		// Without a readable state record nothing is known to be
		// unreferenced: keep everything.
		return
	}
	type entry struct {
		id  string
		gen uint64
	}
	entries := make([]entry, 0, len(s.index))
	for id, gen := range s.index {
		entries = append(entries, entry{id, gen})
	}
	slices.SortFunc(entries, func(a, b entry) int { return cmp.Compare(a.gen, b.gen) })
	protected := append(s.state.refs(), keep)
	for _, e := range entries {
		if excess == 0 {
			break
		}
		if slices.Contains(protected, e.id) {
			continue
		}
		if err := s.fs.Remove(filepath.Join(s.ckDir, fileName(e.gen, e.id))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Error(err, "pruning old checkpoint", "id", e.id)
			continue
		}
		delete(s.index, e.id)
		excess--
	}
}

// SetState implements [LKGStore]. The record is written twice, to two
// files in turn, each through a temporary file, fsync, rename and
// directory fsync; a damaged copy found by Initialize is kept aside as
// <copy>.corrupt first.
func (s *FSStore) SetState(ctx context.Context, st State) error {
	if err := st.Validate(); err != nil {
		return fmt.Errorf("checkpoint: set state: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ready {
		return fmt.Errorf("checkpoint: set state: %w", ErrNotInitialized)
	}
	if err := s.flush(); err != nil {
		return fmt.Errorf("checkpoint: set state: %w", err)
	}
	for _, id := range st.refs() {
		if id == "" {
			continue
		}
		gen, ok := s.index[id]
		if !ok {
			return fmt.Errorf("checkpoint: set state: checkpoint %q: %w", id, ErrNotFound)
		}
		if _, err := s.fs.Stat(filepath.Join(s.ckDir, fileName(gen, id))); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("checkpoint: set state: checkpoint %q: file missing: %w", id, ErrNotFound)
			}
			return fmt.Errorf("checkpoint: set state: checkpoint %q: %w", id, err)
		}
	}
	if err := s.writeState(st.clone(), logr.FromContextOrDiscard(ctx)); err != nil {
		return fmt.Errorf("checkpoint: set state: %w", err)
	}
	return nil
}

// writeState writes st to both copies of the record, in turn. Memory
// follows what is on disk: once one copy is in place, st is the state, even
// if the rest failed (the error is still returned, and the next write
// retries what is missing).
func (s *FSStore) writeState(st State, log logr.Logger) error {
	gen := s.stateGen + 1
	data := encodeMeta(st, gen)
	var errs []error
	written := 0
	for i, slot := range stateSlots {
		path := filepath.Join(s.dir, slot)
		if s.damaged[i] {
			// Keep the damaged copy for inspection; replace an older one.
			aside := path + corruptSuffix
			if err := s.fs.Remove(aside); err != nil && !errors.Is(err, fs.ErrNotExist) {
				log.Error(err, "removing an older damaged state copy", "path", aside)
			}
			if err := s.fs.Rename(path, aside); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("keep damaged %s: %w", path, err))
				continue
			}
			s.damaged[i] = false
		}
		renamed, err := s.writeFileAtomic(s.dir, slot, data)
		if renamed {
			written++
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if written > 0 {
		s.state, s.stateGen, s.stateErr = st, gen, nil
	}
	return errors.Join(errs...)
}

// flush retries the directory fsyncs that failed after a rename.
func (s *FSStore) flush() error {
	for dir := range s.unsynced {
		if err := s.fs.SyncDir(dir); err != nil {
			return fmt.Errorf("the previous write is not yet durable: %w", err)
		}
		delete(s.unsynced, dir)
	}
	return nil
}

// writeFileAtomic replaces dir/name with data so that after a crash the
// file holds either its old content or data: it writes a temporary file
// (0600) in dir, fsyncs it, renames it over name and fsyncs dir. renamed
// reports whether the rename happened; if the directory fsync then failed,
// dir is remembered and synced again before the next write.
func (s *FSStore) writeFileAtomic(dir, name string, data []byte) (renamed bool, err error) {
	var rnd [8]byte
	for i := range rnd {
		rnd[i] = byte(rand.Uint32())
	}
	tmp := filepath.Join(dir, tempPrefix+hex.EncodeToString(rnd[:]))
	f, err := s.fs.Create(tmp, 0o600)
	if err != nil {
		return false, err
	}
	defer func() {
		if !renamed {
			_ = s.fs.Remove(tmp)
		}
	}()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := s.fs.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return false, err
	}
	if err := s.fs.SyncDir(dir); err != nil {
		s.unsynced[dir] = true
		return true, err
	}
	return true, nil
}
