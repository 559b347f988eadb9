package checkpoint

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-logr/logr"
)

const (
	checkpointsDir = "checkpoints"
	legacyMetaName = "meta"
	lockName       = "lock"
	corruptSuffix  = ".corrupt"
	tempPrefix     = ".tmp-"
	genDigits      = 16

	// DefaultMaxGenerations is the history bound FSStore uses when
	// FSConfig.MaxGenerations is 0.
	DefaultMaxGenerations = 10
)

// stateSlots are the two copies of the state record, written in this order.
var stateSlots = [2]string{"state-a", "state-b"}

// FSConfig configures an [FSStore].
type FSConfig struct {
	// Dir is the store's directory. It is created (0700) by Initialize if
	// missing; its parent must exist. Required.
	Dir string
	// MaxGenerations bounds how many checkpoints are kept. A Save deletes
	// the oldest checkpoints beyond this bound, except those the state
	// record refers to (assigned, active, last-known-good), which are never
	// deleted. 0 means DefaultMaxGenerations; it must be at least 1.
	MaxGenerations int
	// FS is the file system to work on; nil means [OSFS].
	FS FS
}

// FSStore is an [LKGStore] in a directory, with the crash-safety
// guarantees and format described in the package documentation. It is safe
// for concurrent use within one process. Initialize locks the directory
// against every other FSStore, in this process or another, until Close.
type FSStore struct {
	fs      FS
	dir     string
	ckDir   string
	maxGens int

	mu       sync.RWMutex
	ready    bool
	lock     io.Closer
	state    State
	stateGen uint64
	stateErr error             // why the state record is unusable, if it is
	damaged  [2]bool           // state slots found damaged, kept aside before rewriting
	index    map[string]uint64 // checkpoint ID -> generation
	maxGen   uint64
	unsynced map[string]bool // directories whose last rename may not be durable yet
}

var _ LKGStore = (*FSStore)(nil)

// NewFS returns a file-system store for cfg. It touches nothing on disk;
// call Initialize before use and Close after.
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
	if cfg.FS == nil {
		cfg.FS = OSFS{}
	}
	dir := filepath.Clean(cfg.Dir)
	return &FSStore{fs: cfg.FS, dir: dir, ckDir: filepath.Join(dir, checkpointsDir), maxGens: cfg.MaxGenerations,
		unsynced: map[string]bool{}}, nil
}

// Dir returns the store's directory.
func (s *FSStore) Dir() string { return s.dir }

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
	case path == "":
		return fmt.Errorf("checkpoint: load %q: the %s checkpoint has no file in %s: %w: %w", id, role, s.ckDir, ErrCorrupt, ErrNotFound)
	default:
		return fmt.Errorf("checkpoint: load %q: the %s checkpoint's file %s is missing: %w: %w", id, role, path, ErrCorrupt, ErrNotFound)
	}
}

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

// Close releases the directory lock. The store can be initialized again.
func (s *FSStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ready = false
	if s.lock == nil {
		return nil
	}
	err := s.lock.Close()
	s.lock = nil
	return err
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

// scanCheckpoints indexes the checkpoint files by name alone.
func (s *FSStore) scanCheckpoints(log logr.Logger) (map[string]uint64, uint64, error) {
	entries, err := s.fs.ReadDir(s.ckDir)
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
