package storecheck

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/reconkit/reconkit/versiongate"
)

// Kind names a store operation the Recorder logs.
type Kind string

// The operations the model knows. A watch is logged as its start, each
// batch or status it delivered, and its end (see watches.go).
const (
	KindPublish   Kind = "publish"
	KindKeepAlive Kind = "keepalive"
	KindDelete    Kind = "delete"
	KindList      Kind = "list"
	KindRead      Kind = "read"
	KindFence     Kind = "fence"
	KindWrite     Kind = "write"
	// KindWatch is a watch's start from Input.From (WatchRecords, or
	// WatchStatus when Input.Status).
	KindWatch Kind = "watch"
	// KindRecordsEvent is a batch of record changes a watch delivered:
	// Output.Records (a nil Value is a deletion) at Output.Rev, after
	// Input.From (the watch's start or its previous batch).
	KindRecordsEvent Kind = "records-event"
	// KindStatusEvent is a status a watch delivered: Output.Value and
	// Exists at Output.Rev, after Input.From.
	KindStatusEvent Kind = "status-event"
	// KindWatchEnd is a watch's end; only a TooOld one is checked.
	KindWatchEnd Kind = "watch-end"
	// KindMovedOn is the store's watch history moving on (a compaction,
	// a server restart that drops its watch cache): revisions reported
	// before it may be unwatchable after it.
	KindMovedOn Kind = "moved-on"
)

// Input is an operation's arguments.
type Input struct {
	Kind Kind
	// ID is the record's ID (publish, keepalive, delete).
	ID string
	// Value is the record's (publish) or the status' (write) value.
	Value string
	// Lease is the record's lease (keepalive, delete).
	Lease int64
	// Token is the term's fencing token (fence, write).
	Token uint64
	// Guarded says the store fences the term by a comparison of its own
	// (an etcd guard) rather than by its token (fence, write).
	Guarded bool
	// NodesRev is the write's condition on the records; 0 for none.
	NodesRev int64
	// Tentative says the store validates a conditioned write after
	// applying it (write). See ValidatedAfterWrite.
	Tentative bool
	// Lingers says a keep-alive reported lost may leave the record in
	// place for a while (keepalive), a watch may report a deletion late
	// (records event), and a publish's claim on the ID may outlive its
	// record or the publish itself (publish). See LostRecordsLinger.
	Lingers bool
	// Watch numbers the watch (watch, events, end); Status says it is a
	// watch of the status.
	Watch  int
	Status bool
	// From is the revision a watch started from (watch, end), or the
	// watch's position before an event: its start, or its last event's
	// revision.
	From int64
	// CreatedAfter, when above From, is where the records a batch shows
	// created must come after (records event): the checker sets it when
	// it checks identical batches of several watches as one (see
	// mergeEvents), From being the lowest of their positions.
	CreatedAfter int64
	// Window says the watch's start revision was outside the window of
	// history the store declares it keeps when the watch ended, so that
	// the store could answer it "too old" (end). See WatchWindow.
	Window bool
}

// Outcome classifies how an operation ended.
type Outcome string

// Outcomes. Unknown is a transient error: the operation may or may not
// have taken effect, at any time after its call.
const (
	OK           Outcome = "ok"
	Held         Outcome = "held"          // publish: ErrRecordHeld
	Lost         Outcome = "lost"          // keepalive: ErrRecordLost; fence, write: ErrLeadershipLost
	NodesChanged Outcome = "nodes-changed" // write: ErrNodesChanged
	TooOld       Outcome = "too-old"       // watch end: the revision is no longer watchable
	Unknown      Outcome = "unknown"
)

// Output is an operation's result.
type Output struct {
	Outcome Outcome
	// Err is the error's text, for the log.
	Err string
	// Lease is the published record's lease (publish).
	Lease int64
	// Rev is the revision the store reported (publish, list, read).
	Rev int64
	// Records are the listed records, sorted by ID (list).
	Records []versiongate.Record
	// Held are the IDs of listed records the store reported held (list,
	// a HeldLister): seen deleted, and listed while their node may still
	// be serving. Sorted.
	Held []string `json:",omitempty"`
	// Value and Exists are the status read (read).
	Value  string
	Exists bool
}

// Op is one logged operation. Call and Return are read from one monotonic
// source (time since the Recorder was made); Return is Open when the
// operation's outcome is Unknown.
type Op struct {
	Client int
	Name   string
	Input  Input
	Output Output
	Call   time.Duration
	Return time.Duration
}

// Open is the return time of an operation whose effect may land at any
// time after its call.
const Open = time.Duration(1<<63 - 1)

// String describes the operation for logs and the visualization.
func (o Op) String() string { return describe(o.Input, o.Output) }

// Recorder logs every operation made through the stores it wraps. It is
// safe for concurrent use; the zero value is not: use NewRecorder.
type Recorder struct {
	start     time.Time
	guarded   func(versiongate.Term) bool
	tentative bool
	lingers   bool
	tooOld    func(error) bool
	window    time.Duration

	mu      sync.Mutex
	ops     []Op
	clients []string
	watches int
	calls   []Op
	// revCall maps each revision an operation reported to the earliest
	// call of one that reported it: a change after that revision took
	// effect after that call (see watchStart).
	revCall map[int64]time.Duration
	// movedOn holds the interval of each MovedOn.
	movedOn [][2]time.Duration
}

// NewRecorder returns an empty Recorder. guarded reports whether the store
// under test fences a term by a comparison of its own instead of its token
// (for the etcd store: the term implements etcdstore.Guard); nil means
// every term is fenced by its token.
func NewRecorder(guarded func(versiongate.Term) bool, opts ...RecorderOption) *Recorder {
	if guarded == nil {
		guarded = func(versiongate.Term) bool { return false }
	}
	r := &Recorder{start: time.Now(), guarded: guarded, tooOld: func(error) bool { return false }, revCall: map[int64]time.Duration{}}
	for _, o := range opts {
		o(r)
	}
	return r
}

// RecorderOption configures NewRecorder.
type RecorderOption func(*Recorder)

// ValidatedAfterWrite tells the model that the store under test applies a
// status write conditioned on the records first and validates it after
// (the Kubernetes store): such a write may be seen by readers before it
// returns, and undone if it is refused, and a later term's Fence undoes
// one never validated. See the package documentation.
func ValidatedAfterWrite() RecorderOption { return func(r *Recorder) { r.tentative = true } }

// LostRecordsLinger tells the model that a keep-alive of the store under
// test can report a record lost while the record still exists (the
// Kubernetes store: the record's liveness lapsed, and the reaper deletes
// it later): the record stays listable until a listing omits it, and its
// lease is never kept alive again. Such a store's watch may also report a
// deletion late (the Kubernetes store holds one its heartbeat does not
// yet confirm), so a batch that omits a deletion the model knows of is
// not refused there, and its publish may be refused as held by what an
// earlier publish of the ID left (a heartbeat Lease) while no record of
// the ID exists. See the package documentation.
func LostRecordsLinger() RecorderOption { return func(r *Recorder) { r.lingers = true } }

// Wrap returns s logging every operation as one client named name. Each
// call makes a new client: give each goroutine that calls the store
// sequentially (a node, a checker) its own, so the log can be drawn per
// client.
func (r *Recorder) Wrap(name string, s versiongate.Store) versiongate.Store {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clients = append(r.clients, name)
	return &client{r: r, id: len(r.clients) - 1, name: name, s: s}
}

// History returns a copy of the operations logged so far, in the order they
// returned (open ones in the order they were called).
func (r *Recorder) History() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

func (r *Recorder) now() time.Duration { return time.Since(r.start) }

func (r *Recorder) log(o Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, o)
	if o.Output.Outcome == OK && o.Output.Rev > 0 {
		if c, ok := r.revCall[o.Output.Rev]; !ok || o.Call < c {
			r.revCall[o.Output.Rev] = o.Call
		}
	}
}

// count notes a call of in by the client named name at call, whatever
// its outcome, for the request budget (see Calls).
func (r *Recorder) count(name string, in Input, call time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, Op{Name: name, Input: in, Call: call})
}

// Calls returns every call made through the Recorder's clients, in the
// order made, failed ones included (History drops reads whose outcome is
// unknown): each with its client's name, its input and its call time.
// CheckBudget counts them.
func (r *Recorder) Calls() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// client is one client's view of a wrapped store.
type client struct {
	r    *Recorder
	id   int
	name string
	s    versiongate.Store
}

// done logs in and out, with out classified from err by classes (the
// sentinel each documented outcome wraps). A read whose outcome is
// unknown is dropped: it changed nothing and told nothing.
func (c *client) done(ctx context.Context, in Input, call time.Duration, err error, out Output, classes map[error]Outcome) {
	ret := c.r.now()
	switch {
	case err == nil:
		out.Outcome = OK
	case ctx.Err() != nil:
		// Cut by its own context, whatever the error says (a term's
		// context ends with ErrLeadershipLost as its cause, and a request
		// it cut reports that cause): the call may or may not have taken
		// effect, and no later term need have fenced the store.
		out = Output{Outcome: Unknown, Err: err.Error()}
	default:
		out = Output{Outcome: Unknown, Err: err.Error()}
		for sentinel, o := range classes {
			if errors.Is(err, sentinel) {
				out.Outcome = o
			}
		}
	}
	if out.Outcome == Unknown {
		switch in.Kind {
		case KindList, KindRead, KindKeepAlive:
			return
		}
		ret = Open
	}
	c.r.log(Op{Client: c.id, Name: c.name, Input: in, Output: out, Call: call, Return: ret})
}

func (c *client) PublishRecord(ctx context.Context, id string, value []byte, ttl time.Duration) (versiongate.RecordLease, error) {
	in := Input{Kind: KindPublish, ID: id, Value: string(value), Lingers: c.r.lingers}
	call := c.r.now()
	c.r.count(c.name, in, call)
	l, err := c.s.PublishRecord(ctx, id, value, ttl)
	c.done(ctx, in, call, err, Output{Lease: l.Lease, Rev: l.Revision}, map[error]Outcome{versiongate.ErrRecordHeld: Held})
	return l, err
}

func (c *client) KeepAlive(ctx context.Context, l versiongate.RecordLease) (time.Duration, error) {
	in := Input{Kind: KindKeepAlive, ID: l.ID, Lease: l.Lease, Lingers: c.r.lingers}
	call := c.r.now()
	c.r.count(c.name, in, call)
	ttl, err := c.s.KeepAlive(ctx, l)
	c.done(ctx, in, call, err, Output{}, map[error]Outcome{versiongate.ErrRecordLost: Lost})
	return ttl, err
}

func (c *client) DeleteRecord(ctx context.Context, l versiongate.RecordLease) error {
	in := Input{Kind: KindDelete, ID: l.ID, Lease: l.Lease}
	call := c.r.now()
	c.r.count(c.name, in, call)
	err := c.s.DeleteRecord(ctx, l)
	c.done(ctx, in, call, err, Output{}, nil)
	return err
}

// HeldLister is a Store whose listings may show a record after its
// deletion, while its node may still be serving (the Kubernetes store
// holds a deletion its record's heartbeat does not confirm), and that says
// which. The recorder lists through it when the store is one, and the
// model accepts a held record only if it is, or was, the model's record of
// that ID with that value.
type HeldLister interface {
	// ListRecordsHeld is ListRecords, also returning the IDs of the
	// listed records that are held.
	ListRecordsHeld(ctx context.Context) (recs []versiongate.Record, rev int64, held []string, err error)
}

func (c *client) ListRecords(ctx context.Context) ([]versiongate.Record, int64, error) {
	call := c.r.now()
	c.r.count(c.name, Input{Kind: KindList}, call)
	var (
		recs []versiongate.Record
		rev  int64
		held []string
		err  error
	)
	if hl, ok := c.s.(HeldLister); ok {
		recs, rev, held, err = hl.ListRecordsHeld(ctx)
		held = slices.Sorted(slices.Values(held))
	} else {
		recs, rev, err = c.s.ListRecords(ctx)
	}
	sorted := make([]versiongate.Record, len(recs))
	for i, r := range recs {
		sorted[i] = versiongate.Record{ID: r.ID, Value: slices.Clone(r.Value)}
	}
	slices.SortFunc(sorted, func(a, b versiongate.Record) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	c.done(ctx, Input{Kind: KindList}, call, err, Output{Records: sorted, Rev: rev, Held: held}, nil)
	return recs, rev, err
}

func (c *client) ReadStatus(ctx context.Context) (versiongate.StoredStatus, error) {
	call := c.r.now()
	c.r.count(c.name, Input{Kind: KindRead}, call)
	st, err := c.s.ReadStatus(ctx)
	c.done(ctx, Input{Kind: KindRead}, call, err, Output{Value: string(st.Value), Exists: st.Value != nil, Rev: st.Revision}, nil)
	return st, err
}

func (c *client) Fence(ctx context.Context, t versiongate.Term) error {
	in := Input{Kind: KindFence, Token: t.Token(), Guarded: c.r.guarded(t)}
	call := c.r.now()
	c.r.count(c.name, in, call)
	err := c.s.Fence(ctx, t)
	c.done(ctx, in, call, err, Output{}, map[error]Outcome{versiongate.ErrLeadershipLost: Lost})
	return err
}

func (c *client) WriteStatus(ctx context.Context, t versiongate.Term, value []byte, nodesRev int64) error {
	in := Input{Kind: KindWrite, Token: t.Token(), Guarded: c.r.guarded(t), Value: string(value), NodesRev: nodesRev, Tentative: c.r.tentative}
	call := c.r.now()
	c.r.count(c.name, in, call)
	err := c.s.WriteStatus(ctx, t, value, nodesRev)
	c.done(ctx, in, call, err, Output{}, map[error]Outcome{versiongate.ErrLeadershipLost: Lost, versiongate.ErrNodesChanged: NodesChanged})
	return err
}

// describe renders an operation for logs and the visualization.
func describe(in Input, out Output) string {
	var args string
	switch in.Kind {
	case KindPublish:
		args = fmt.Sprintf("%s=%s", in.ID, short(in.Value))
	case KindKeepAlive, KindDelete:
		args = fmt.Sprintf("%s lease %x", in.ID, in.Lease)
	case KindFence:
		args = fmt.Sprintf("token %d%s", in.Token, guardedMark(in.Guarded))
	case KindWrite:
		args = fmt.Sprintf("token %d%s, %s, nodesRev %d", in.Token, guardedMark(in.Guarded), short(in.Value), in.NodesRev)
	case KindWatch, KindWatchEnd, KindRecordsEvent, KindStatusEvent:
		what := "records"
		if in.Status {
			what = "status"
		}
		args = fmt.Sprintf("#%d %s after %d", in.Watch, what, in.From)
	}
	res := string(out.Outcome)
	if out.Outcome == OK {
		switch in.Kind {
		case KindPublish:
			res = fmt.Sprintf("lease %x rev %d", out.Lease, out.Rev)
		case KindList:
			ids := make([]string, len(out.Records))
			for i, r := range out.Records {
				ids[i] = r.ID
				if slices.Contains(out.Held, r.ID) {
					ids[i] += " (held)"
				}
			}
			res = fmt.Sprintf("%v rev %d", ids, out.Rev)
		case KindRead, KindStatusEvent:
			res = fmt.Sprintf("%s rev %d", short(out.Value), out.Rev)
			if !out.Exists {
				res = fmt.Sprintf("none rev %d", out.Rev)
			}
		case KindRecordsEvent:
			chs := make([]string, len(out.Records))
			for i, r := range out.Records {
				chs[i] = "+" + r.ID
				if r.Value == nil {
					chs[i] = "-" + r.ID
				}
			}
			res = fmt.Sprintf("%v rev %d", chs, out.Rev)
		}
	}
	return fmt.Sprintf("%s(%s) -> %s", in.Kind, args, res)
}

func guardedMark(g bool) string {
	if g {
		return " guarded"
	}
	return ""
}

// short renders an encoded status or node record for display.
func short(v string) string {
	if st, err := versiongate.DecodeStatus([]byte(v)); err == nil {
		return st.String()
	}
	if id, ver, err := versiongate.DecodeNodeRelease([]byte(v)); err == nil {
		return id + "@" + ver.String()
	}
	if len(v) > 16 {
		return fmt.Sprintf("%x…", v[:8])
	}
	return fmt.Sprintf("%x", v)
}
