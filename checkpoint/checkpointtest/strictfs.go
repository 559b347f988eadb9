package checkpointtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/reconkit/reconkit/checkpoint"
)

// ErrCrashed is returned by every operation of a [StrictFS] that has been
// frozen: the simulated process is dead and does nothing more.
var ErrCrashed = errors.New("checkpointtest: simulated crash")

// Op names a StrictFS operation, for fault injection.
type Op string

// Operations of a StrictFS.
const (
	OpReadFile Op = "ReadFile"
	OpReadDir  Op = "ReadDir"
	OpStat     Op = "Stat"
	OpMkdir    Op = "Mkdir"
	OpCreate   Op = "Create"
	OpWrite    Op = "Write"
	OpSync     Op = "Sync" // fsync of a file
	OpClose    Op = "Close"
	OpRename   Op = "Rename"
	OpRemove   Op = "Remove"
	OpSyncDir  Op = "SyncDir" // fsync of a directory
	OpLock     Op = "Lock"
)

// StrictFS is an in-memory [checkpoint.FS] that models what survives a
// power loss as strictly as Pebble's vfs.NewStrictMem: a file's content is
// durable only up to its last Sync, and a directory's entries (creations,
// renames, removals) only up to the directory's last SyncDir. [StrictFS.Crash]
// drops everything else, as a power loss would.
//
// Knobs: [StrictFS.FreezeAfterSyncs] kills the simulated process at a given
// sync point, [StrictFS.Fault] fails chosen operations, [StrictFS.Syncs]
// counts sync points. Locks are held per StrictFS and released by Close or
// a crash.
//
// What it does not model: unsynced changes that happen to reach the disk
// anyway (it drops all of them, never a subset), torn writes inside one
// file, reordering of synced writes by a lying disk, and file modes (it
// records them but checks no permissions). Paths are cleaned and must be
// absolute or relative to the same root.
type StrictFS struct {
	mu      sync.Mutex
	root    *node
	syncs   int
	freezeN int // freeze when syncs reaches freezeN; <0: never
	frozen  bool
	fault   func(op Op, name string) error
	locks   map[string]bool
}

type node struct {
	dir     bool
	mode    fs.FileMode
	data    []byte           // current content of a file
	synced  []byte           // durable content of a file
	entries map[string]*node // current entries of a directory
	durable map[string]*node // durable entries of a directory
}

var _ checkpoint.FS = (*StrictFS)(nil)

// NewStrictFS returns an empty file system with a durable root directory.
func NewStrictFS() *StrictFS {
	return &StrictFS{root: newDir(0o755), freezeN: -1, locks: map[string]bool{}}
}

func newDir(mode fs.FileMode) *node {
	return &node{dir: true, mode: mode, entries: map[string]*node{}, durable: map[string]*node{}}
}

// Syncs returns how many sync points (file Sync and SyncDir calls that
// took effect) have passed since the StrictFS was made.
func (m *StrictFS) Syncs() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.syncs
}

// FreezeAfterSyncs makes the simulated process die once n sync points have
// passed: from then on every operation fails with [ErrCrashed], the sync
// that would be the (n+1)-th included. n counts from the StrictFS's
// creation, as Syncs does; a negative n disarms it.
func (m *StrictFS) FreezeAfterSyncs(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.freezeN = n
	if n >= 0 && m.syncs >= n {
		m.frozen = true
	}
}

// Fault sets a function consulted before every operation; a non-nil error
// fails that operation without effect. nil removes it.
func (m *StrictFS) Fault(f func(op Op, name string) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fault = f
}

// Crash simulates a power loss and a reboot: every directory keeps only its
// durable entries, every file only its synced content, locks are released,
// a freeze is lifted and faults are removed.
func (m *StrictFS) Crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	var reset func(n *node)
	seen := map[*node]bool{}
	reset = func(n *node) {
		if seen[n] {
			return
		}
		seen[n] = true
		if !n.dir {
			n.data = bytes.Clone(n.synced)
			return
		}
		n.entries = make(map[string]*node, len(n.durable))
		for k, v := range n.durable {
			n.entries[k] = v
			reset(v)
		}
	}
	reset(m.root)
	m.frozen, m.freezeN, m.fault = false, -1, nil
	clear(m.locks)
}

// check runs the freeze and fault knobs; m.mu is held.
func (m *StrictFS) check(op Op, name string) error {
	if m.frozen {
		return fmt.Errorf("%s %s: %w", op, name, ErrCrashed)
	}
	if (op == OpSync || op == OpSyncDir) && m.freezeN >= 0 && m.syncs >= m.freezeN {
		m.frozen = true
		return fmt.Errorf("%s %s: %w", op, name, ErrCrashed)
	}
	if m.fault != nil {
		if err := m.fault(op, name); err != nil {
			return err
		}
	}
	return nil
}

func split(name string) []string {
	name = strings.TrimPrefix(path.Clean("/"+name), "/")
	if name == "" {
		return nil
	}
	return strings.Split(name, "/")
}

// lookup returns the node at name, or nil.
func (m *StrictFS) lookup(name string) *node {
	n := m.root
	for _, p := range split(name) {
		if !n.dir {
			return nil
		}
		n = n.entries[p]
		if n == nil {
			return nil
		}
	}
	return n
}

// parent returns the directory holding name and name's last element.
func (m *StrictFS) parent(op Op, name string) (*node, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", &fs.PathError{Op: string(op), Path: name, Err: fs.ErrInvalid}
	}
	dir := m.lookup(path.Join(parts[:len(parts)-1]...))
	if dir == nil || !dir.dir {
		return nil, "", &fs.PathError{Op: string(op), Path: name, Err: fs.ErrNotExist}
	}
	return dir, parts[len(parts)-1], nil
}

// ReadFile implements [checkpoint.FS].
func (m *StrictFS) ReadFile(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpReadFile, name); err != nil {
		return nil, err
	}
	n := m.lookup(name)
	switch {
	case n == nil:
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
	case n.dir:
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("is a directory")}
	}
	return bytes.Clone(n.data), nil
}

// ReadDir implements [checkpoint.FS].
func (m *StrictFS) ReadDir(name string) ([]fs.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpReadDir, name); err != nil {
		return nil, err
	}
	n := m.lookup(name)
	switch {
	case n == nil:
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	case !n.dir:
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	var out []fs.DirEntry
	for k, v := range n.entries {
		out = append(out, fs.FileInfoToDirEntry(info{name: k, n: v}))
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// Stat implements [checkpoint.FS].
func (m *StrictFS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpStat, name); err != nil {
		return nil, err
	}
	n := m.lookup(name)
	if n == nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return info{name: path.Base(name), n: n}, nil
}

// Mkdir implements [checkpoint.FS].
func (m *StrictFS) Mkdir(name string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpMkdir, name); err != nil {
		return err
	}
	dir, base, err := m.parent(OpMkdir, name)
	if err != nil {
		return err
	}
	if dir.entries[base] != nil {
		return &fs.PathError{Op: "mkdir", Path: name, Err: fs.ErrExist}
	}
	dir.entries[base] = newDir(perm)
	return nil
}

// MkdirAll creates name and its missing parents, durably: a test helper
// for setting up a store's parent directory.
func (m *StrictFS) MkdirAll(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for _, p := range split(name) {
		c := n.entries[p]
		if c == nil {
			c = newDir(0o755)
			n.entries[p], n.durable[p] = c, c
		}
		n = c
	}
}

// Create implements [checkpoint.FS].
func (m *StrictFS) Create(name string, perm fs.FileMode) (checkpoint.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpCreate, name); err != nil {
		return nil, err
	}
	dir, base, err := m.parent(OpCreate, name)
	if err != nil {
		return nil, err
	}
	if dir.entries[base] != nil {
		return nil, &fs.PathError{Op: "create", Path: name, Err: fs.ErrExist}
	}
	n := &node{mode: perm}
	dir.entries[base] = n
	return &memFile{fs: m, n: n, name: name}, nil
}

// Rename implements [checkpoint.FS]. Both names must be in one directory's
// tree; replacing a directory fails as on Linux when it is not empty or the
// source is a file.
func (m *StrictFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpRename, oldname); err != nil {
		return err
	}
	od, ob, err := m.parent(OpRename, oldname)
	if err != nil {
		return err
	}
	nd, nb, err := m.parent(OpRename, newname)
	if err != nil {
		return err
	}
	src := od.entries[ob]
	if src == nil {
		return &fs.PathError{Op: "rename", Path: oldname + " " + newname, Err: fs.ErrNotExist}
	}
	if dst := nd.entries[nb]; dst != nil && dst.dir && (!src.dir || len(dst.entries) > 0) {
		return &fs.PathError{Op: "rename", Path: oldname + " " + newname, Err: errors.New("destination is a directory")}
	}
	delete(od.entries, ob)
	nd.entries[nb] = src
	return nil
}

// Remove implements [checkpoint.FS].
func (m *StrictFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpRemove, name); err != nil {
		return err
	}
	dir, base, err := m.parent(OpRemove, name)
	if err != nil {
		return err
	}
	n := dir.entries[base]
	switch {
	case n == nil:
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	case n.dir && len(n.entries) > 0:
		return &fs.PathError{Op: "remove", Path: name, Err: errors.New("directory not empty")}
	}
	delete(dir.entries, base)
	return nil
}

// SyncDir implements [checkpoint.FS].
func (m *StrictFS) SyncDir(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpSyncDir, name); err != nil {
		return err
	}
	n := m.lookup(name)
	if n == nil || !n.dir {
		return &fs.PathError{Op: "fsync", Path: name, Err: fs.ErrNotExist}
	}
	n.durable = make(map[string]*node, len(n.entries))
	for k, v := range n.entries {
		n.durable[k] = v
	}
	m.syncs++
	return nil
}

// Lock implements [checkpoint.FS]. The lock file itself is created like
// any file (durable once its directory is synced).
func (m *StrictFS) Lock(name string) (io.Closer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpLock, name); err != nil {
		return nil, err
	}
	key := path.Clean("/" + name)
	if m.locks[key] {
		return nil, fmt.Errorf("%s: %w", name, checkpoint.ErrLocked)
	}
	dir, base, err := m.parent(OpLock, name)
	if err != nil {
		return nil, err
	}
	if dir.entries[base] == nil {
		dir.entries[base] = &node{mode: 0o600}
	}
	m.locks[key] = true
	return lockHandle{m: m, key: key}, nil
}

type lockHandle struct {
	m   *StrictFS
	key string
}

func (l lockHandle) Close() error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	delete(l.m.locks, l.key)
	return nil
}

type memFile struct {
	fs     *StrictFS
	n      *node
	name   string
	closed bool
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.check(OpWrite, f.name); err != nil {
		return 0, err
	}
	if f.closed {
		return 0, fs.ErrClosed
	}
	f.n.data = append(f.n.data, p...)
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.check(OpSync, f.name); err != nil {
		return err
	}
	if f.closed {
		return fs.ErrClosed
	}
	f.n.synced = bytes.Clone(f.n.data)
	f.fs.syncs++
	return nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.check(OpClose, f.name); err != nil {
		return err
	}
	if f.closed {
		return fs.ErrClosed
	}
	f.closed = true
	return nil
}

type info struct {
	name string
	n    *node
}

func (i info) Name() string { return i.name }
func (i info) Size() int64  { return int64(len(i.n.data)) }
func (i info) Mode() fs.FileMode {
	if i.n.dir {
		return fs.ModeDir | i.n.mode
	}
	return i.n.mode
}
func (i info) ModTime() time.Time { return time.Time{} }
func (i info) IsDir() bool        { return i.n.dir }
func (i info) Sys() any           { return nil }
