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
// temporary entries left by an interrupted write (stale, since their writer
// no longer holds the lock), sets aside whatever replaced the checkpoints
// directory, indexes the checkpoints and reads the state
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
			return fmt.Errorf("checkpoint: initialize %s: %w", s.dir, s.lockFailed(err))
		}
		s.lock = l
	}
	if err := s.setAsideCheckpointsDir(log); err != nil {
		return fmt.Errorf("checkpoint: initialize %s: %w", s.dir, err)
	}
	if err := s.ensureDir(s.ckDir); err != nil {
		return fmt.Errorf("checkpoint: initialize %s: %w", s.dir, err)
	}
	for _, d := range []string{s.dir, s.ckDir} {
		// No fsync: a removal lost to a power loss only brings back a
		// stale file, which the next Initialize removes again.
		removed, err := s.removeTemps(d, log)
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
			// The store makes only directories here.
			return fmt.Errorf("%s is not a directory: %w", dir, ErrCorrupt)
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

// lockFailed explains why the lock file could not be locked. Anything but a
// regular file in its place is damage the store could not have made: the
// error then wraps [ErrCorrupt]. Such an entry is not removed, since
// removing what another FSStore may be locking at that very moment would
// let two of them hold the store.
func (s *FSStore) lockFailed(err error) error {
	if errors.Is(err, ErrLocked) {
		return err
	}
	path := filepath.Join(s.dir, lockName)
	if fi, serr := s.fs.Stat(path); serr == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is a %s, not a file, and cannot be locked; remove it by hand: %w: %w", path, kind(fi.Mode()), err, ErrCorrupt)
	}
	return err
}

// setAsideCheckpointsDir moves a checkpoints directory that something else
// replaced (a file, a device) aside as checkpoints.corrupt, so that a new
// empty directory can take its place and new assignments can be saved. The
// checkpoints it held are lost: s.lost says so, wrapping [ErrCorrupt], in
// the error of every Load of a checkpoint the state record names. The
// state record itself, kept apart, stays usable.
func (s *FSStore) setAsideCheckpointsDir(log logr.Logger) error {
	fi, err := s.fs.Stat(s.ckDir)
	if err != nil || fi.IsDir() {
		return nil // missing (a first start) or fine; ensureDir handles both
	}
	aside := s.ckDir + corruptSuffix
	damage := fmt.Errorf("%s is a %s, not a directory", s.ckDir, kind(fi.Mode()))
	if err := s.fs.Remove(aside); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w, and %s cannot be removed to keep it: %w: %w", damage, aside, err, ErrCorrupt)
	}
	if err := s.fs.Rename(s.ckDir, aside); err != nil {
		return fmt.Errorf("%w and cannot be moved aside: %w: %w", damage, err, ErrCorrupt)
	}
	// The rename becomes durable with the parent's fsync in ensureDir.
	s.lost = fmt.Errorf("%w (kept as %s): every checkpoint it held is lost: %w", damage, aside, ErrCorrupt)
	log.Error(s.lost, "checkpoint directory replaced by something else; made a new one")
	return nil
}

// kind names a file mode's type for people.
func kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	default:
		return "special file (" + m.Type().String() + ")"
	}
}

// removeTemps deletes what interrupted writes left in dir: every entry
// named .tmp-*, whatever its shape (a directory is emptied first; a
// symbolic link is removed, never followed). The caller holds the
// directory lock, so no live writer owns them. An entry that cannot be
// removed is logged and left: it is in no one's way.
func (s *FSStore) removeTemps(dir string, log logr.Logger) (int, error) {
	entries, err := s.fs.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := s.removeAll(path, e.IsDir()); err != nil {
			log.Error(err, "cannot remove a temporary entry; leaving it", "path", path)
			continue
		}
		n++
	}
	return n, nil
}

// removeAll removes path and, if it is a directory, everything in it,
// without following symbolic links.
func (s *FSStore) removeAll(path string, isDir bool) error {
	if isDir {
		entries, err := s.fs.ReadDir(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		for _, e := range entries {
			if err := s.removeAll(filepath.Join(path, e.Name()), e.IsDir()); err != nil {
				return err
			}
		}
	}
	if err := s.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
