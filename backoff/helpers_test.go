package backoff

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// epoch is the fake clock's starting time in every test.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Every test that waits runs in a testing/synctest bubble: synctest.Wait
// returns once every goroutine of the test is durably blocked, so "the code
// under test is waiting on the clock" is observed exactly, with no real-time
// deadline and no busy loop, however slow the machine is.

// waitFor waits until every goroutine of the bubble is blocked and fails the
// test unless cond holds then.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	synctest.Wait()
	if !cond() {
		t.Fatalf("%s did not happen: every goroutine of the test is blocked", what)
	}
}

// async runs f in a goroutine and returns a channel with its result.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// awaitWaiter waits until the code under test waits on fc. It fails if done
// delivers a result first.
func awaitWaiter(t *testing.T, fc *clocktesting.FakeClock, done <-chan error) {
	t.Helper()
	synctest.Wait()
	select {
	case err := <-done:
		t.Fatalf("returned %v while a wait was expected", err)
	default:
	}
	require.True(t, fc.HasWaiters(), "the code under test is blocked but not on the fake clock")
}

// stepExactly waits for a timer on fc and advances fc by exactly d, checking
// that the timer did not fire before d.
func stepExactly(t *testing.T, fc *clocktesting.FakeClock, done <-chan error, d time.Duration) {
	t.Helper()
	awaitWaiter(t, fc, done)
	if d > 1 {
		fc.Step(d - 1)
		synctest.Wait()
		require.True(t, fc.HasWaiters(), "timer fired before %v", d)
	}
	fc.Step(1)
}

// result waits for the result of async. In a bubble the timeout is on the
// bubble's clock: it fires only once every goroutine is blocked, that is,
// when the call can never return.
func result(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Hour):
		t.Fatal("the call never returned")
		return nil
	}
}

// drive runs f, stepping fc by step whenever the code under test waits on
// it, and returns f's result.
func drive(t *testing.T, fc *clocktesting.FakeClock, step time.Duration, f func() error) error {
	t.Helper()
	done := async(f)
	for {
		synctest.Wait()
		select {
		case err := <-done:
			return err
		default:
		}
		require.True(t, fc.HasWaiters(), "the code under test is blocked but not on the fake clock")
		fc.Step(step)
	}
}

// recorder is an operation that records the fake-clock offset of each call
// and returns what next says for the n-th call (1-based).
type recorder struct {
	fc   *clocktesting.FakeClock
	next func(n int) error

	mu    sync.Mutex
	calls []time.Duration
}

func (r *recorder) op(context.Context) error {
	r.mu.Lock()
	r.calls = append(r.calls, r.fc.Since(epoch))
	n := len(r.calls)
	r.mu.Unlock()
	return r.next(n)
}

func (r *recorder) times() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// entry is one captured log line. level is -1 for Error.
type entry struct {
	at    time.Duration // fake-clock offset when logged
	level int
	msg   string
	err   error
	kv    map[string]any
}

// capture is a logr sink that records entries up to a verbosity.
type capture struct {
	fc        *clocktesting.FakeClock // nil: offsets on the real clock from created
	created   time.Time
	verbosity int

	mu      sync.Mutex
	entries []entry
}

func newCapture(fc *clocktesting.FakeClock, verbosity int) *capture {
	return &capture{fc: fc, created: time.Now(), verbosity: verbosity}
}

func (c *capture) ctx(parent context.Context) context.Context {
	return logr.NewContext(parent, logr.New(&captureSink{c: c}))
}

func (c *capture) all() []entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.entries)
}

// at returns the offsets of the entries with msg logged at level.
func (c *capture) at(msg string, level int) []time.Duration {
	var out []time.Duration
	for _, e := range c.all() {
		if e.msg == msg && e.level == level {
			out = append(out, e.at)
		}
	}
	return out
}

type captureSink struct {
	c      *capture
	values []any
}

func (s *captureSink) Init(logr.RuntimeInfo)  {}
func (s *captureSink) Enabled(level int) bool { return level <= s.c.verbosity }
func (s *captureSink) Info(level int, msg string, kv ...any) {
	s.add(level, nil, msg, kv)
}
func (s *captureSink) Error(err error, msg string, kv ...any) {
	s.add(-1, err, msg, kv)
}
func (s *captureSink) WithValues(kv ...any) logr.LogSink {
	return &captureSink{c: s.c, values: append(slices.Clone(s.values), kv...)}
}
func (s *captureSink) WithName(string) logr.LogSink { return s }

func (s *captureSink) add(level int, err error, msg string, kv []any) {
	m := map[string]any{}
	all := append(slices.Clone(s.values), kv...)
	for i := 0; i+1 < len(all); i += 2 {
		m[all[i].(string)] = all[i+1]
	}
	at := time.Since(s.c.created)
	if s.c.fc != nil {
		at = s.c.fc.Since(epoch)
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.entries = append(s.c.entries, entry{at: at, level: level, msg: msg, err: err, kv: m})
}

func secs(ss ...float64) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = time.Duration(s * float64(time.Second))
	}
	return out
}
