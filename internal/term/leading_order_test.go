package term

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// heldCtx is a term context whose end the test controls: context.AfterFunc
// hands it the callback, and the test runs it when it chooses, as the
// runtime may run it late after the context ended.
type heldCtx struct {
	done chan struct{} // never closed: the callback is the only signal

	mu    sync.Mutex
	err   error
	after []func()
}

func newHeldCtx() *heldCtx { return &heldCtx{done: make(chan struct{})} }

func (c *heldCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *heldCtx) Done() <-chan struct{}       { return c.done }
func (c *heldCtx) Value(any) any               { return nil }

func (c *heldCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc is the method context.AfterFunc uses to schedule f.
func (c *heldCtx) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.after = append(c.after, f)
	i := len(c.after) - 1
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		stopped := c.after[i] != nil
		c.after[i] = nil
		return stopped
	}
}

// end ends the context without running its callbacks.
func (c *heldCtx) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = context.Canceled
}

// fire runs the callbacks end left pending.
func (c *heldCtx) fire() {
	c.mu.Lock()
	after := c.after
	c.after = nil
	c.mu.Unlock()
	for _, f := range after {
		if f != nil {
			f()
		}
	}
}

func (f *Flag) get() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.on
}

// Term A ends, but its callback runs only after term B began: the flag
// stays up while B leads, and drops, waking the waiters, when B ends.
func TestFlagLateCallbackOfEndedTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var f Flag
		a := newHeldCtx()
		f.Follow(a)
		a.end()
		b, endB := context.WithCancel(t.Context())
		defer endB()
		f.Follow(b)
		a.fire()
		synctest.Wait() // A's callback ran
		if !f.get() {
			t.Fatal("flag down while term B leads: term A's late callback lowered it")
		}
		changed := f.Changed()
		endB()
		synctest.Wait()
		select {
		case <-changed:
		default:
			t.Fatal("Changed not closed when term B ended")
		}
		if f.get() {
			t.Fatal("flag up after term B ended")
		}
	})
}

// A term that starts while the flag is still up (the previous term's
// callback is late) is a change: the waiters wake.
func TestFlagFollowWhileUpWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var f Flag
		a := newHeldCtx()
		f.Follow(a)
		a.end()
		changed := f.Changed()
		b, endB := context.WithCancel(t.Context())
		defer endB()
		f.Follow(b)
		select {
		case <-changed:
		default:
			t.Fatal("Changed not closed when term B started")
		}
		a.fire()
		synctest.Wait()
	})
}
