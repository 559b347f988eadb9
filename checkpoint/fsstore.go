package checkpoint

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

const (
	metaName       = "meta"
	corruptSuffix  = ".corrupt"
	checkpointsDir = "checkpoints"
	tempPrefix     = ".tmp-"
	genDigits      = 16

	// DefaultMaxGenerations is the history bound FSStore uses when
	// FSConfig.MaxGenerations is 0.
	DefaultMaxGenerations = 10
)

// FSConfig configures an [FSStore].
type FSConfig struct {
	// Dir is the store's directory. It is created (0700) by Initialize if
	// missing; its parent must exist. Required.
	Dir string
	// MaxGenerations bounds how many checkpoints are kept. After a Save,
	// the oldest checkpoints beyond this bound are deleted, except the
	// current and the last-known-good ones, which are never deleted.
	// 0 means DefaultMaxGenerations; it must be at least 1.
	MaxGenerations int
}

// FSStore is an [LKGStore] in a directory of the local file system, with the
// crash-safety guarantees and format described in the package
// documentation. It is safe for concurrent use within one process; two
// processes must not use the same directory at once.
type FSStore struct {
	dir     string
	ckDir   string
	maxGens int

	mu      sync.RWMutex
	ready   bool
	meta    meta
	metaErr error             // why the metadata record is unusable, if it is
	index   map[string]uint64 // checkpoint ID -> generation
	maxGen  uint64
}

var _ LKGStore = (*FSStore)(nil)

// NewFS returns a file-system store for cfg. It touches nothing on disk;
// call Initialize before use.
func NewFS(cfg FSConfig) (*FSStore, error) {
	if cfg.Dir == "" {
		return nil, errors.New("checkpoint: FSConfig.Dir is required")
	}
	if cfg.MaxGenerations < 0 {
		return nil, fmt.Errorf("checkpoint: FSConfig.MaxGenerations is %d, must be at least 1 (or 0 for the default)", cfg.MaxGenerations)
	}
	if cfg.MaxGenerations == 0 {
		cfg.MaxGenerations = DefaultMaxGenerations
	}
	dir := filepath.Clean(cfg.Dir)
	return &FSStore{dir: dir, ckDir: filepath.Join(dir, checkpointsDir), maxGens: cfg.MaxGenerations}, nil
}

// Dir returns the store's directory.
func (s *FSStore) Dir() string { return s.dir }

// Initialize implements [LKGStore]. It creates the directories, deletes
// temporary files left by an interrupted write, indexes the checkpoints
// and reads the metadata record. A damaged metadata record does not fail
// Initialize; it is reported by Current, LastKnownGood and CurrentSetAt.
func (s *FSStore) Initialize(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ready = false
	log := logr.FromContextOrDiscard(ctx)
	for _, d := range []string{s.dir, s.ckDir} {
		if err := ensureDir(d); err != nil {
			return fmt.Errorf("checkpoint: initialize %s: %w", s.dir, err)
		}
	}
	for _, d := range []string{s.dir, s.ckDir} {
		removed, err := removeTemps(d)
		if err != nil {
			return fmt.Errorf("checkpoint: initialize %s: %w", s.dir, err)
		}
		if removed > 0 {
			log.V(1).Info("removed temporary files of an interrupted write", "dir", d, "count", removed)
			if err := syncDir(d); err != nil {
				return fmt.Errorf("checkpoint: initialize %s: %w", s.dir, err)
			}
		}
	}
	index, maxGen, err := scanCheckpoints(s.ckDir, log)
	if err != nil {
		return fmt.Errorf("checkpoint: initialize %s: %w", s.dir, err)
	}
	s.index, s.maxGen = index, maxGen
	s.meta, s.metaErr = meta{}, nil
	data, err := os.ReadFile(filepath.Join(s.dir, metaName))
	switch {
	case errors.Is(err, fs.ErrNotExist) && len(index) == 0:
		// A fresh store: record that nothing is assigned.
		if err := writeFileAtomic(s.dir, metaName, encodeMeta(meta{})); err != nil {
			return fmt.Errorf("checkpoint: initialize %s: %w", s.dir, err)
		}
	case errors.Is(err, fs.ErrNotExist):
		s.metaErr = fmt.Errorf("metadata record %s missing while %d checkpoints exist: %w", filepath.Join(s.dir, metaName), len(index), ErrCorrupt)
	case err != nil:
		return fmt.Errorf("checkpoint: initialize %s: read metadata: %w", s.dir, err)
	default:
		m, err := decodeMeta(data)
		if err != nil {
			s.metaErr = fmt.Errorf("%s: %w", filepath.Join(s.dir, metaName), err)
		} else {
			s.meta = m
		}
	}
	if s.metaErr != nil {
		log.Error(s.metaErr, "checkpoint metadata unusable; current and last-known-good are unknown")
	}
	s.ready = true
	return nil
}

// Current implements [LKGStore].
func (s *FSStore) Current(ctx context.Context) (string, error) {
	m, err := s.readMeta(ctx)
	return m.Current, err
}

// LastKnownGood implements [LKGStore].
func (s *FSStore) LastKnownGood(ctx context.Context) (string, error) {
	m, err := s.readMeta(ctx)
	return m.LastKnownGood, err
}

// CurrentSetAt implements [LKGStore].
func (s *FSStore) CurrentSetAt(ctx context.Context) (time.Time, error) {
	m, err := s.readMeta(ctx)
	return m.CurrentSetAt, err
}

func (s *FSStore) readMeta(ctx context.Context) (meta, error) {
	if err := ctx.Err(); err != nil {
		return meta{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.ready {
		return meta{}, fmt.Errorf("checkpoint: %s: %w", s.dir, ErrNotInitialized)
	}
	if s.metaErr != nil {
		return meta{}, fmt.Errorf("checkpoint: %w", s.metaErr)
	}
	return s.meta, nil
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
	data, err := os.ReadFile(path)
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
// while referenced by the metadata record, or with the directory gone, is
// corruption, not just absence.
func (s *FSStore) missing(id, path string) error {
	if _, err := os.Stat(s.dir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checkpoint: load %q: store directory %s has disappeared: %w", id, s.dir, ErrNotInitialized)
	}
	if id == s.meta.Current || id == s.meta.LastKnownGood {
		role := "current"
		if id != s.meta.Current {
			role = "last-known-good"
		}
		if path == "" {
			return fmt.Errorf("checkpoint: load %q: the %s checkpoint has no file in %s: %w: %w", id, role, s.ckDir, ErrCorrupt, ErrNotFound)
		}
		return fmt.Errorf("checkpoint: load %q: the %s checkpoint's file %s is missing: %w: %w", id, role, path, ErrCorrupt, ErrNotFound)
	}
	return fmt.Errorf("checkpoint: load %q: %w", id, ErrNotFound)
}

// Save implements [LKGStore]. It writes the checkpoint to a temporary file
// in the checkpoints directory, fsyncs it, renames it into place and fsyncs
// the directory; then it prunes history beyond MaxGenerations.
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
	gen := s.maxGen + 1
	if err := writeFileAtomic(s.ckDir, fileName(gen, cp.ID), encodeCheckpoint(cp, gen)); err != nil {
		return fmt.Errorf("checkpoint: save %q: %w", cp.ID, err)
	}
	s.maxGen = gen
	s.index[cp.ID] = gen
	log := logr.FromContextOrDiscard(ctx)
	if exists {
		// The old file was damaged; the new one replaces it.
		if err := os.Remove(filepath.Join(s.ckDir, fileName(oldGen, cp.ID))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Error(err, "removing replaced damaged checkpoint", "id", cp.ID)
		}
	}
	s.prune(cp.ID, log)
	return nil
}

// sameContent reports whether the stored checkpoint id equals cp. A stored
// checkpoint that no longer verifies may be replaced; an intact one with
// another payload is a conflict.
func (s *FSStore) sameContent(cp Checkpoint, gen uint64) (bool, error) {
	data, err := os.ReadFile(filepath.Join(s.ckDir, fileName(gen, cp.ID)))
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

// prune deletes the oldest checkpoints beyond maxGens, sparing current,
// last-known-good and keep. A pruned file that survives a power loss (the
// directory is not fsynced after removal) is harmless extra history.
func (s *FSStore) prune(keep string, log logr.Logger) {
	if len(s.index) <= s.maxGens {
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
	excess := len(s.index) - s.maxGens
	for _, e := range entries {
		if excess == 0 {
			break
		}
		if e.id == keep || e.id == s.meta.Current || e.id == s.meta.LastKnownGood {
			continue
		}
		if s.metaErr != nil {
			// Without a readable metadata record, nothing is known to be
			// unreferenced: keep everything.
			return
		}
		if err := os.Remove(filepath.Join(s.ckDir, fileName(e.gen, e.id))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Error(err, "pruning old checkpoint", "id", e.id)
			continue
		}
		delete(s.index, e.id)
		excess--
	}
}

// SetCurrent implements [LKGStore].
func (s *FSStore) SetCurrent(ctx context.Context, id string, at time.Time) error {
	return s.update(ctx, id, "set current", func(m *meta) {
		m.Current, m.CurrentSetAt = id, at
	})
}

// SetLastKnownGood implements [LKGStore].
func (s *FSStore) SetLastKnownGood(ctx context.Context, id string) error {
	return s.update(ctx, id, "set last-known-good", func(m *meta) {
		m.LastKnownGood = id
	})
}

// Reset implements [LKGStore].
func (s *FSStore) Reset(ctx context.Context) (bool, error) {
	var changed bool
	err := s.update(ctx, "", "reset", func(m *meta) {
		changed = m.Current != ""
		*m = meta{}
	})
	return changed, err
}

// update applies change to the metadata record and writes it crash-safely.
// A damaged record is kept as meta.corrupt before it is replaced, and the
// replacement starts from an empty state.
func (s *FSStore) update(ctx context.Context, id, op string, change func(*meta)) error {
	if err := validateRef(id); err != nil {
		return fmt.Errorf("checkpoint: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ready {
		return fmt.Errorf("checkpoint: %s: %w", op, ErrNotInitialized)
	}
	if id != "" {
		gen, ok := s.index[id]
		if !ok {
			return fmt.Errorf("checkpoint: %s %q: %w", op, id, ErrNotFound)
		}
		if _, err := os.Stat(filepath.Join(s.ckDir, fileName(gen, id))); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("checkpoint: %s %q: file missing: %w", op, id, ErrNotFound)
			}
			return fmt.Errorf("checkpoint: %s %q: %w", op, id, err)
		}
	}
	m := s.meta
	if s.metaErr != nil {
		src := filepath.Join(s.dir, metaName)
		if err := os.Rename(src, src+corruptSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("checkpoint: %s: keep damaged metadata: %w", op, err)
		}
		m = meta{}
	}
	change(&m)
	if err := writeFileAtomic(s.dir, metaName, encodeMeta(m)); err != nil {
		return fmt.Errorf("checkpoint: %s: %w", op, err)
	}
	s.meta, s.metaErr = m, nil
	return nil
}

// fileName is a checkpoint's file name: its generation in fixed-width hex,
// "-", and its ID. Sorting names sorts generations.
func fileName(gen uint64, id string) string {
	return fmt.Sprintf("%0*x-%s", genDigits, gen, id)
}

// parseFileName splits a checkpoint file name; ok is false for any other
// name.
func parseFileName(name string) (gen uint64, id string, ok bool) {
	if len(name) < genDigits+2 || name[genDigits] != '-' {
		return 0, "", false
	}
	gen, err := strconv.ParseUint(name[:genDigits], 16, 64)
	if err != nil {
		return 0, "", false
	}
	id = name[genDigits+1:]
	if ValidateID(id) != nil {
		return 0, "", false
	}
	return gen, id, true
}

// scanCheckpoints indexes the checkpoint files in dir by name alone.
func scanCheckpoints(dir string, log logr.Logger) (map[string]uint64, uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	index := make(map[string]uint64, len(entries))
	var maxGen uint64
	for _, e := range entries {
		gen, id, ok := parseFileName(e.Name())
		if !ok || !e.Type().IsRegular() {
			log.Info("ignoring unexpected entry in checkpoint directory", "name", e.Name())
			continue
		}
		if old, dup := index[id]; dup {
			// Only a crash between writing a replacement and removing
			// the damaged original leaves two; the newer one wins.
			gen = max(gen, old)
		}
		index[id] = gen
		maxGen = max(maxGen, gen)
	}
	return index, maxGen, nil
}

// ensureDir creates dir with mode 0700 if it is missing, and fsyncs its
// parent so the new entry survives a power loss.
func ensureDir(dir string) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	return syncDir(filepath.Dir(dir))
}

// removeTemps deletes temporary files left in dir by interrupted writes.
func removeTemps(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, err
		}
		n++
	}
	return n, nil
}

// writeFileAtomic replaces dir/name with data so that after a crash the
// file holds either its old content or data: it writes a temporary file
// (0600) in dir, fsyncs it, renames it over name and fsyncs dir.
func writeFileAtomic(dir, name string, data []byte) (err error) {
	f, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
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
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory so that renames and creations in it are
// durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
