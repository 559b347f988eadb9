package term

import (
	"context"
	"sync"
)

// Flag is an elector's cached "am I leading": a value and a channel
// closed at each change, so that hosts read it without a request and wait
// for a change without polling.
type Flag struct {
	mu  sync.Mutex
	on  bool
	ch  chan struct{} // closed and replaced at the next change; nil until asked for
	gen uint64        // counts Follow and Set: a term's end lowers the flag only if nothing came since
}

// Set records v and wakes the waiters if it changed.
func (f *Flag) Set(v bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen++
	if f.on != v {
		f.on = v
		f.wake()
	}
}

// wake closes the channel of the waiters; f.mu is held.
func (f *Flag) wake() {
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

// Follow raises the flag for a term that just started, waking the waiters
// even if it was up (a term starts), and lowers it the moment the term
// context ends, unless a later term started since: the callback of an
// ended term may run after the next term's Follow, and must not lower the
// flag under it.
func (f *Flag) Follow(ctx context.Context) {
	f.mu.Lock()
	f.gen++
	gen := f.gen
	f.on = true
	f.wake()
	f.mu.Unlock()
	context.AfterFunc(ctx, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.gen != gen || !f.on {
			return
		}
		f.on = false
		f.wake()
	})
}
