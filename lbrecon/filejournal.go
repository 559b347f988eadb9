package lbrecon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// ErrCorruptJournal is wrapped by [FileJournal.Load] when the file does not
// hold a journal. The file is left as it is for an operator to inspect.
var ErrCorruptJournal = errors.New("lbrecon: corrupt intent journal")

// FileJournal is a [Journal] in one file, rewritten whole at every change
// the crash-safe way: the new content is written to a temporary file in
// the same directory, synced, renamed over the journal, and the directory
// is synced. A crash at any point leaves either the old or the new
// journal, never a mix. Reconcilers of one owner may share one
// FileJournal value (entries are kept per scope), never two values on one
// file (each rewrites the file from what it holds); the directory must
// exist. It is safe for concurrent use.
type FileJournal struct {
	path string

	mu      sync.Mutex
	intents map[entryKey]Intent // nil until loaded
}

var _ Journal = (*FileJournal)(nil)

// NewFileJournal returns a journal kept in the file at path.
func NewFileJournal(path string) *FileJournal { return &FileJournal{path: path} }

type journalFile struct {
	Version int      `json:"version"`
	Intents []Intent `json:"intents"`
}

// Load implements [Journal]: a missing file is an empty journal.
func (j *FileJournal) Load(context.Context) ([]Intent, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.read(); err != nil {
		return nil, err
	}
	out := make([]Intent, 0, len(j.intents))
	for _, in := range j.intents {
		out = append(out, in)
	}
	return out, nil
}

// read loads the file into j.intents once. Called with mu held.
func (j *FileJournal) read() error {
	if j.intents != nil {
		return nil
	}
	b, err := os.ReadFile(j.path)
	if errors.Is(err, os.ErrNotExist) {
		j.intents = make(map[entryKey]Intent)
		return nil
	}
	if err != nil {
		return fmt.Errorf("lbrecon: read intent journal: %w", err)
	}
	var f journalFile
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("%w %s: %w", ErrCorruptJournal, j.path, err)
	}
	if f.Version != 1 {
		return fmt.Errorf("%w %s: version %d, want 1", ErrCorruptJournal, j.path, f.Version)
	}
	m := make(map[entryKey]Intent, len(f.Intents))
	for i, in := range f.Intents {
		if in.Kind == "" || in.Name == "" || in.At.IsZero() {
			return fmt.Errorf("%w %s: intent %d lacks a kind, name or time", ErrCorruptJournal, j.path, i)
		}
		m[in.key()] = in
	}
	j.intents = m
	return nil
}

// Record implements [Journal]: the intents are durable when it returns nil.
func (j *FileJournal) Record(_ context.Context, intents []Intent) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.read(); err != nil {
		return err
	}
	next := make(map[entryKey]Intent, len(j.intents)+len(intents))
	for k, in := range j.intents {
		next[k] = in
	}
	for _, in := range intents {
		next[in.key()] = in
	}
	return j.write(next)
}

// Forget implements [Journal].
func (j *FileJournal) Forget(_ context.Context, intents []Intent) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.read(); err != nil {
		return err
	}
	next := make(map[entryKey]Intent, len(j.intents))
	for k, in := range j.intents {
		next[k] = in
	}
	for _, in := range intents {
		delete(next, in.key())
	}
	if len(next) == len(j.intents) {
		return nil
	}
	return j.write(next)
}

// write replaces the file with intents: temporary file, fsync, rename,
// fsync of the directory. Called with mu held; j.intents changes only
// once the new file is durable.
func (j *FileJournal) write(intents map[entryKey]Intent) error {
	f := journalFile{Version: 1, Intents: make([]Intent, 0, len(intents))}
	for _, in := range intents {
		f.Intents = append(f.Intents, in)
	}
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("lbrecon: encode intent journal: %w", err)
	}
	dir := filepath.Dir(j.path)
	tmp, err := os.CreateTemp(dir, filepath.Base(j.path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("lbrecon: write intent journal: %w", err)
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(b); err != nil {
		return fmt.Errorf("lbrecon: write intent journal: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("lbrecon: sync intent journal: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("lbrecon: write intent journal: %w", err)
	}
	if err := os.Rename(tmp.Name(), j.path); err != nil {
		return fmt.Errorf("lbrecon: replace intent journal: %w", err)
	}
	done = true
	j.intents = intents // the file holds them, even if the directory's sync fails
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("lbrecon: sync intent journal's directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("lbrecon: sync intent journal's directory: %w", err)
	}
	return nil
}
