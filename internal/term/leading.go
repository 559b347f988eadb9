package term

import (
	"context"
	"sync"
)

// Flag is an elector's cached "am I leading": a value and a channel
// closed at each change, so that hosts read it without a request and wait
// for a change without polling.
type Flag struct {
	mu sync.Mutex
	on bool
	ch chan struct{} // closed and replaced at the next change; nil until asked for
}

// Set records v and wakes the waiters if it changed.
func (f *Flag) Set(v bool) {
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

// Changed returns a channel closed at the next change.
func (f *Flag) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ch == nil {
		f.ch = make(chan struct{})
	}
	return f.ch
}

// Follow raises the flag for a term that just started and lowers it the
// moment the term context ends.
func (f *Flag) Follow(ctx context.Context) {
	f.Set(true)
	context.AfterFunc(ctx, func() { f.Set(false) })
}
