package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// FS is the small file-system interface an [FSStore] works through. [OSFS]
// is the real one; checkpointtest.StrictFS is an in-memory one that loses
// every write not made durable when it simulates a power loss. Names are
// slash-separated paths as the store builds them with path/filepath.
type FS interface {
	// ReadFile returns the content of a regular file.
	ReadFile(name string) ([]byte, error)
	// ReadDir lists a directory, sorted by name.
	ReadDir(name string) ([]fs.DirEntry, error)
	// Stat describes a file or directory.
	Stat(name string) (fs.FileInfo, error)
	// Mkdir creates a directory; its entry is durable once the parent is
	// synced.
	Mkdir(name string, perm fs.FileMode) error
	// Create creates a new file, failing if name exists.
	Create(name string, perm fs.FileMode) (File, error)
	// Rename replaces newname with oldname atomically; durable once the
	// directory is synced.
	Rename(oldname, newname string) error
	// Remove deletes a file or an empty directory.
	Remove(name string) error
	// SyncDir makes the directory's entries (creations, renames, removals)
	// durable.
	SyncDir(name string) error
	// Lock takes an exclusive advisory lock on the file name (creating it)
	// without waiting: an error wrapping [ErrLocked] if someone holds it.
	// Closing the result releases it.
	Lock(name string) (io.Closer, error)
}

// File is a file being written by an [FS].
type File interface {
	io.Writer
	// Sync makes the file's content durable.
	Sync() error
	Close() error
}

// OSFS is the [FS] of the operating system. Lock uses flock(2) on Unix;
// elsewhere it fails.
type OSFS struct{}

var _ FS = OSFS{}

// ReadFile implements [FS].
func (OSFS) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }

// ReadDir implements [FS].
func (OSFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

// Stat implements [FS].
func (OSFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

// Mkdir implements [FS].
func (OSFS) Mkdir(name string, perm fs.FileMode) error { return os.Mkdir(name, perm) }

// Create implements [FS].
func (OSFS) Create(name string, perm fs.FileMode) (File, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
}

// Rename implements [FS].
func (OSFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// Remove implements [FS].
func (OSFS) Remove(name string) error { return os.Remove(name) }

// SyncDir implements [FS].
func (OSFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", name, err)
	}
	return nil
}

// Lock implements [FS].
func (OSFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := flock(f); err != nil {
		_ = f.Close()
		if errors.Is(err, ErrLocked) {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return f, nil
}
