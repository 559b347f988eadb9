package election

import (
	"context"
	"sync"
)

// leadingFlag is an elector's cached "am I leading": a value and a channel
// closed at each change, so that hosts read it without a request and wait
// for a change without polling.
type leadingFlag struct {
	mu sync.Mutex
	on bool
	ch chan struct{} // closed and replaced at the next change; nil until asked for
}

// set records v and wakes the waiters if it changed.
func (f *leadingFlag) set(v bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.on == v {
		return
	}
	f.on = v
	if f.ch != nil {
		close(f.ch)
		f.ch = nil
	}
}

// changed returns a channel closed at the next change.
func (f *leadingFlag) changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ch == nil {
		f.ch = make(chan struct{})
	}
	return f.ch
}

// follow raises the flag for a term that just started and lowers it the
// moment the term context ends.
func (f *leadingFlag) follow(ctx context.Context) {
	f.set(true)
	context.AfterFunc(ctx, func() { f.set(false) })
}
