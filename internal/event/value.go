package event

import (
	"context"
	"errors"
	"sync"
)

// ErrClosed is returned by Watcher.Get after the watcher was closed.
var ErrClosed = errors.New("event: watcher closed")

// Value holds a value of type T that watchers can follow. The zero Value is
// ready to use and holds no value yet. A Value must not be copied after first
// use.
//
// Watchers see the newest value, not every intermediate one: a watcher that
// falls behind skips straight to the latest Set. This is the right shape for
// state (a summary, a status), not for a stream of events.
type Value[T any] struct {
	mu      sync.Mutex
	val     T
	gen     uint64        // number of Set calls so far; 0 means no value yet
	changed chan struct{} // closed and replaced on every Set
}

// Set publishes v to every watcher. It never blocks on watchers.
func (v *Value[T]) Set(val T) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.val = val
	v.gen++
	if v.changed != nil {
		close(v.changed)
		v.changed = nil
	}
}

// Load returns the current value and whether one was ever set.
func (v *Value[T]) Load() (T, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.val, v.gen > 0
}

// Watch returns a new watcher that has seen nothing yet: its first Get returns
// the current value at once if one was set.
func (v *Value[T]) Watch() *Watcher[T] {
	return &Watcher[T]{v: v}
}

// state returns the current value, its generation, and a channel that is
// closed by the next Set.
func (v *Value[T]) state() (T, uint64, <-chan struct{}) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.changed == nil {
		v.changed = make(chan struct{})
	}
	return v.val, v.gen, v.changed
}

// Watcher follows a Value. A Watcher is meant for one goroutine; Close may be
// called from any goroutine.
type Watcher[T any] struct {
	v         *Value[T]
	seen      uint64
	closed    chan struct{}
	once      sync.Once
	closeOnce sync.Once
}

func (w *Watcher[T]) done() chan struct{} {
	w.once.Do(func() { w.closed = make(chan struct{}) })
	return w.closed
}

// Get returns the newest value this watcher has not seen yet, blocking until
// there is one, the context ends, or the watcher is closed.
func (w *Watcher[T]) Get(ctx context.Context) (T, error) {
	closed := w.done()
	for {
		select {
		case <-closed:
			var zero T
			return zero, ErrClosed
		default:
		}
		val, gen, changed := w.v.state()
		if gen > w.seen {
			w.seen = gen
			return val, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		case <-closed:
			var zero T
			return zero, ErrClosed
		}
	}
}

// Close ends the watcher: pending and later calls to Get return ErrClosed.
// Close is idempotent.
func (w *Watcher[T]) Close() {
	closed := w.done()
	w.closeOnce.Do(func() { close(closed) })
}
