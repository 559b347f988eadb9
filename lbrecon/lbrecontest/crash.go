package lbrecontest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/reconkit/reconkit/lbrecon"
)

// ErrProcessCrashed is returned by every call through a [Crasher] from its
// crash point until Restart: the process that made them is gone.
var ErrProcessCrashed = errors.New("lbrecontest: process crashed")

// Crasher wraps an engine to model a process that dies at a crash point:
// the n-th write (Create, CreateIdempotent, Destroy, Tag, Update, Repair)
// through it either never reaches the engine, or reaches it and its answer
// is lost. A CreateIdempotent that the engine answers with
// lbrecon.ErrNotSupported (it takes no tokens, and sent nothing) is a
// probe, not a write: it is not counted, and the Create the reconciler
// sends instead is the write; from then on every call fails with [ErrProcessCrashed], until
// Restart starts the next process. A test cancels the dying process's
// context on Crashed and builds a new reconciler (the next process, with
// no memory) after Restart. It forwards the optional interfaces, answering
// lbrecon.ErrNotSupported where the engine lacks them. It models a
// process that dies, not a machine that loses power: files the process
// wrote (an intent journal) keep what the operating system has, synced or
// not. It is safe for concurrent use.
type Crasher struct {
	e lbrecon.Engine

	mu      sync.Mutex
	writes  int
	sent    int           // writes that reached the engine since Arm or Restart
	at      int           // crash at this write; 0: never
	after   bool          // the crashing write reaches the engine
	dying   bool          // the crashing write is in flight: nothing else is sent
	probing chan struct{} // a first probe is in flight: other writes wait for its answer
	tokens  int           // 1: the engine takes idempotency tokens; -1: it does not; 0: not known yet
	crashed bool
	done    chan struct{}
	point   *CrashPoint // the write the armed crash came at
}

// CrashPoint is the write an armed [Crasher] crashed at, for a test to
// assert that its crash came where it says: the verb (VerbCreate for
// Create and CreateIdempotent), the object the write was about (the
// desired object of an Update), and whether it reached the engine.
type CrashPoint struct {
	Verb   lbrecon.Verb
	Object lbrecon.Object
	Sent   bool
}

// String describes the crash point, as "create backend/b1 (sent)".
func (p CrashPoint) String() string {
	sent := "not sent"
	if p.Sent {
		sent = "sent"
	}
	return fmt.Sprintf("%s %s/%s (%s)", p.Verb, p.Object.Kind, p.Object.Name, sent)
}

var (
	_ lbrecon.Engine            = (*Crasher)(nil)
	_ lbrecon.Repairer          = (*Crasher)(nil)
	_ lbrecon.Updater           = (*Crasher)(nil)
	_ lbrecon.IdempotentCreator = (*Crasher)(nil)
	_ lbrecon.ListLagger        = (*Crasher)(nil)
	_ lbrecon.ListingLagger     = (*Crasher)(nil)
)

// NewCrasher returns e behind a crash point that is not armed.
func NewCrasher(e lbrecon.Engine) *Crasher { return &Crasher{e: e, done: make(chan struct{})} }

// Arm sets the crash point: the n-th write from now (n >= 1), reaching the
// engine when after is true. It returns a channel closed at the crash.
func (c *Crasher) Arm(n int, after bool) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes, c.sent, c.at, c.after, c.point = 0, 0, n, after, nil
	return c.done
}

// Crash makes the process crash now, as at a crash point between calls.
func (c *Crasher) Crash() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.crash()
}

func (c *Crasher) crash() {
	c.dying = true
	if !c.crashed {
		c.crashed = true
		close(c.done)
	}
}

// Crashed returns a channel closed when the process crashes.
func (c *Crasher) Crashed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// Point returns the write the armed crash point came at; ok is false
// while it has not come, and after a crash by [Crasher.Crash].
func (c *Crasher) Point() (p CrashPoint, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.point == nil {
		return CrashPoint{}, false
	}
	return *c.point, true
}

// CrashedAt reports, for a test to assert, whether the armed crash came
// where the test armed it: at the n-th write, which reached the engine
// only when after. Its error says where the process crashed instead, or
// that it did not.
func (c *Crasher) CrashedAt(n int, after bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	want := n - 1
	if after {
		want = n
	}
	switch {
	case c.point == nil:
		return fmt.Errorf("lbrecontest: no crash at write %d: %d writes", n, c.writes)
	case c.writes != n || c.point.Sent != after || c.sent != want:
		return fmt.Errorf("lbrecontest: crash armed at write %d (sent %v) came at write %d, %v, after %d writes sent", n, after, c.writes, *c.point, c.sent)
	}
	return nil
}

// Restart starts the next process: calls go through again, and the crash
// point is disarmed.
func (c *Crasher) Restart() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.crashed, c.dying, c.at, c.writes, c.sent, c.point = false, false, 0, 0, 0, nil
	c.done = make(chan struct{})
}

// Writes returns the writes counted since the last Arm or Restart.
func (c *Crasher) Writes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

// Sent returns the writes that reached the engine since the last Arm or
// Restart: after a crash at the n-th write, n when the crashing write
// reached it, n-1 when it did not. A test asserts it to prove its crash
// came where it says.
func (c *Crasher) Sent() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent
}

// read lets a read through unless the process crashed.
func (c *Crasher) read() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dying {
		return ErrProcessCrashed
	}
	return nil
}

// write counts a write and reports whether it reaches the engine,
// whether its answer is lost, and whether it is the crash point. While
// the engine's answer to a probe is not known, a probe is sent alone: the
// other writes wait for its answer, which tells whether it was a write,
// and a probe at the crash point makes the process dying only then.
func (c *Crasher) write(probe bool) (send, lose, last bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.probing != nil {
		ch := c.probing
		c.mu.Unlock()
		<-ch
		c.mu.Lock()
	}
	if c.dying {
		return false, true, false
	}
	if probe && c.tokens < 0 {
		return false, false, false // answered by a probe before: no write
	}
	c.writes++
	point := c.at > 0 && c.writes == c.at
	switch {
	case point && !c.after:
		c.dying = true
		return false, true, true
	case probe && c.tokens == 0:
		c.probing = make(chan struct{})
	case point:
		c.dying = true
	}
	return true, point, point
}

// do makes a write through the crash point. The process dies (Crashed is
// closed) once the crashing write has been made, so that the dying
// process's context does not cancel it.
func (c *Crasher) do(v lbrecon.Verb, obj lbrecon.Object, call func() error) error {
	return c.doProbe(v, obj, call, false)
}

// doProbe is do for a write that may be a probe: with probe, an answer
// wrapping lbrecon.ErrNotSupported (nothing sent) is not counted, and the
// crash point, if it was this write, moves to the next one.
func (c *Crasher) doProbe(v lbrecon.Verb, obj lbrecon.Object, call func() error, probe bool) error {
	send, lose, last := c.write(probe)
	if !send && !lose {
		return fmt.Errorf("lbrecontest: idempotency tokens: %w", lbrecon.ErrNotSupported)
	}
	var err error
	if send {
		err = call()
		c.mu.Lock()
		notWrite := probe && errors.Is(err, lbrecon.ErrNotSupported)
		if notWrite {
			c.writes-- // the crash point, if this was it, is the next write
		} else {
			c.sent++
		}
		if probe && c.tokens == 0 {
			c.tokens = map[bool]int{true: -1, false: 1}[notWrite]
			close(c.probing)
			c.probing = nil
			c.dying = c.dying || (last && !notWrite)
		}
		c.mu.Unlock()
		if notWrite {
			return err
		}
	}
	if last {
		c.mu.Lock()
		c.point = &CrashPoint{Verb: v, Object: obj, Sent: send}
		c.mu.Unlock()
		c.Crash()
	}
	if lose {
		return fmt.Errorf("%w (the write's answer is lost)", ErrProcessCrashed)
	}
	return err
}

// List implements lbrecon.Engine.
func (c *Crasher) List(ctx context.Context, q lbrecon.Query) ([]lbrecon.Object, error) {
	if err := c.read(); err != nil {
		return nil, err
	}
	return c.e.List(ctx, q)
}

// Get implements lbrecon.Engine.
func (c *Crasher) Get(ctx context.Context, obj lbrecon.Object) (lbrecon.Object, error) {
	if err := c.read(); err != nil {
		return lbrecon.Object{}, err
	}
	return c.e.Get(ctx, obj)
}

// Create implements lbrecon.Engine.
func (c *Crasher) Create(ctx context.Context, obj lbrecon.Object) (got lbrecon.Object, err error) {
	err = c.do(lbrecon.VerbCreate, obj, func() error { got, err = c.e.Create(ctx, obj); return err })
	return got, err
}

// CreateIdempotent implements lbrecon.IdempotentCreator.
func (c *Crasher) CreateIdempotent(ctx context.Context, obj lbrecon.Object, token string) (got lbrecon.Object, err error) {
	ic, ok := c.e.(lbrecon.IdempotentCreator)
	c.mu.Lock()
	known := c.tokens < 0
	c.mu.Unlock()
	if !ok || known {
		return lbrecon.Object{}, lbrecon.ErrNotSupported
	}
	err = c.doProbe(lbrecon.VerbCreate, obj, func() error { got, err = ic.CreateIdempotent(ctx, obj, token); return err }, true)
	return got, err
}

// Destroy implements lbrecon.Engine.
func (c *Crasher) Destroy(ctx context.Context, obj lbrecon.Object) error {
	return c.do(lbrecon.VerbDestroy, obj, func() error { return c.e.Destroy(ctx, obj) })
}

// Tag implements lbrecon.Engine.
func (c *Crasher) Tag(ctx context.Context, obj lbrecon.Object, tags []string) error {
	return c.do(lbrecon.VerbTag, obj, func() error { return c.e.Tag(ctx, obj, tags) })
}

// Update implements lbrecon.Updater.
func (c *Crasher) Update(ctx context.Context, current, desired lbrecon.Object) (got lbrecon.Object, err error) {
	u, ok := c.e.(lbrecon.Updater)
	if !ok {
		return lbrecon.Object{}, lbrecon.ErrNotSupported
	}
	err = c.do(lbrecon.VerbUpdate, desired, func() error { got, err = u.Update(ctx, current, desired); return err })
	return got, err
}

// Repair implements lbrecon.Repairer.
func (c *Crasher) Repair(ctx context.Context, obj lbrecon.Object) (got lbrecon.Object, err error) {
	r, ok := c.e.(lbrecon.Repairer)
	if !ok {
		return lbrecon.Object{}, lbrecon.ErrNotSupported
	}
	err = c.do(lbrecon.VerbRepair, obj, func() error { got, err = r.Repair(ctx, obj); return err })
	return got, err
}

// ListLagListings implements lbrecon.ListingLagger: the wrapped engine's
// declared count, or 0.
func (c *Crasher) ListLagListings() int {
	if ll, ok := c.e.(lbrecon.ListingLagger); ok {
		return ll.ListLagListings()
	}
	return 0
}

// ListLag implements lbrecon.ListLagger: the wrapped engine's declared
// lag, or 0.
func (c *Crasher) ListLag() time.Duration {
	if ll, ok := c.e.(lbrecon.ListLagger); ok {
		return ll.ListLag()
	}
	return 0
}
