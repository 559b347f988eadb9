package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
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
	lost     error           // why the checkpoints directory was replaced at Initialize, if it was
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
