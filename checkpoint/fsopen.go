package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
)

// Initialize implements [LKGStore]. It creates the directories, locks the
// store (an error wrapping [ErrLocked] if another FSStore holds it), deletes
// temporary files left by an interrupted write (stale, since their writer
// no longer holds the lock), indexes the checkpoints and reads the state
// record. Of the record's two copies the intact one with the higher
// generation wins, and a damaged or outdated copy is rewritten. A record
// with both copies damaged does not fail Initialize; State reports it.
func (s *FSStore) Initialize(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ready = false
	log := logr.FromContextOrDiscard(ctx)
	if err := s.ensureDir(s.dir); err != nil {
		return fmt.Errorf("checkpoint: initialize %s: %w", s.dir, err)
	}
	if s.lock == nil {
		l, err := s.fs.Lock(filepath.Join(s.dir, lockName))
		if err != nil {
			return fmt.Errorf("checkpoint: initialize %s: %w", s.dir, err)
		}
		s.lock = l
	}
	if err := s.ensureDir(s.ckDir); err != nil {
		return fmt.Errorf("checkpoint: initialize %s: %w", s.dir, err)
	}
	for _, d := range []string{s.dir, s.ckDir} {
		// No fsync: a removal lost to a power loss only brings back a
		// stale file, which the next Initialize removes again.
		removed, err := s.removeTemps(d)
		if err != nil {
			return fmt.Errorf("checkpoint: initialize %s: %w", s.dir, err)
		}
		if removed > 0 {
			log.V(1).Info("removed temporary files of an interrupted write", "dir", d, "count", removed)
		}
	}
	clear(s.unsynced)
	index, maxGen, err := s.scanCheckpoints(log)
	if err != nil {
		return fmt.Errorf("checkpoint: initialize %s: %w", s.dir, err)
	}
	s.index, s.maxGen = index, maxGen
	if err := s.readState(log); err != nil {
		return fmt.Errorf("checkpoint: initialize %s: %w", s.dir, err)
	}
	s.ready = true
	return nil
}

// upgrade reads a version-1 record ("meta"), if there is one, and returns
// the State it names. A checkpoint that was on trial gets one more start.
// The old file stays, unused, for a downgrade.
func (s *FSStore) upgrade(log logr.Logger) (State, bool) {
	path := filepath.Join(s.dir, legacyMetaName)
	data, err := s.fs.ReadFile(path)
	if err != nil {
		return State{}, false
	}
	m, err := decodeLegacyMeta(data)
	if err != nil {
		log.Error(err, "ignoring an unreadable version-1 metadata record", "path", path)
		return State{}, false
	}
	hash := func(id string) (string, bool) {
		gen, ok := s.index[id]
		if !ok {
			return "", false
		}
		data, err := s.fs.ReadFile(filepath.Join(s.ckDir, fileName(gen, id)))
		if err != nil {
			return "", false
		}
		cp, _, err := decodeCheckpoint(data)
		if err != nil {
			return "", false
		}
		return cp.Hash, true
	}
	var st State
	if m.LastKnownGood != "" {
		if h, ok := hash(m.LastKnownGood); ok {
			st.LastKnownGood, st.LastKnownGoodHash = m.LastKnownGood, h
		}
	}
	if m.Current != "" {
		if h, ok := hash(m.Current); ok {
			st.Assigned, st.AssignedHash, st.Active = m.Current, h, m.Current
			if m.Current != m.LastKnownGood {
				st.TriesLeft = 1
			}
		}
	}
	log.Info("upgrading the version-1 metadata record", "path", path, "assigned", st.Assigned, "lastKnownGood", st.LastKnownGood)
	return st, true
}

// ensureDir creates dir with mode 0700 if it is missing, and fsyncs its
// parent so the new entry survives a power loss.
func (s *FSStore) ensureDir(dir string) error {
	fi, err := s.fs.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := s.fs.Mkdir(dir, 0o700); err != nil {
		return err
	}
	return s.fs.SyncDir(filepath.Dir(dir))
}

// removeTemps deletes temporary files left in dir by interrupted writes.
// The caller holds the directory lock, so no live writer owns them.
func (s *FSStore) removeTemps(dir string) (int, error) {
	entries, err := s.fs.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		if err := s.fs.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, err
		}
		n++
	}
	return n, nil
}
