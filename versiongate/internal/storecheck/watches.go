package storecheck

import (
	"context"
	"slices"
	"time"

	"github.com/reconkit/reconkit/versiongate"
)

// WatchTooOld tells the Recorder which errors ending a watch say that its
// start revision is no longer watchable (410 Gone on Kubernetes, a
// compacted revision on etcd): the model accepts such an end only where
// the history moved on past that revision (see the package
// documentation). Without it no end is checked.
func WatchTooOld(is func(error) bool) RecorderOption {
	return func(r *Recorder) { r.tooOld = is }
}

// DefaultWatchWindow is the history the Kubernetes apiserver's watch
// cache keeps at least: k8s.io/apiserver's DefaultEventFreshDuration
// (75s; the cache grows to hold that much, up to 100k events of a
// resource). Backend.WatchWindow declares it unless
// Backend.WatchWindowKept says otherwise.
const DefaultWatchWindow = 75 * time.Second

// WatchWindow tells the model that the store under test keeps a window of
// watch history that moves on by itself (the apiserver's watch cache), of
// at least kept: a watch that ends "too old" is accepted only from a
// revision first reported more than kept before the watch ended, or
// before a MovedOn (a restart, after which the history starts anew) that
// began before the watch ended, plus kept (the new history may start a
// little after the server serves again). A server that answers 410 for a
// revision it still had to keep is refused. Without it, only a revision
// at or below one the history moved on from (MovedOn) may be too old.
func WatchWindow(kept time.Duration) RecorderOption {
	return func(r *Recorder) { r.window = kept }
}

// outsideWindow reports whether a watch from rev that ended at end may
// have found rev outside the declared window (see WatchWindow).
func (r *Recorder) outsideWindow(rev int64, end time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	first, ok := r.revCall[rev]
	if r.window <= 0 || !ok {
		return false
	}
	if end-first > r.window {
		return true
	}
	for _, m := range r.movedOn {
		if m[0] < end && first < m[1]+r.window {
			return true
		}
	}
	return false
}

// MovedOn runs fn, which makes the store's watch history move on (a
// compaction, a server restart that drops the watch cache), and logs it:
// a watch from a revision reported before it may end too old after it.
func (r *Recorder) MovedOn(name string, fn func()) {
	r.mu.Lock()
	r.clients = append(r.clients, name)
	id := len(r.clients) - 1
	r.mu.Unlock()
	call := r.now()
	fn()
	ret := r.now()
	r.mu.Lock()
	r.movedOn = append(r.movedOn, [2]time.Duration{call, ret})
	r.mu.Unlock()
	r.log(Op{Client: id, Name: name, Input: Input{Kind: KindMovedOn}, Output: Output{Outcome: OK}, Call: call, Return: ret})
}

func (r *Recorder) newWatch() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.watches++
	return r.watches
}

// watchStart logs a watch's start and returns its number, its input, its
// call time, and the earliest time its events may have taken effect: the
// call of the first operation that reported the start revision (a change
// after it came after that call), or the history's start if none did (a
// fabricated revision, which the model refuses).
func (c *client) watchStart(status bool, rev int64) (int, Input, time.Duration, time.Duration) {
	w := c.r.newWatch()
	c.r.mu.Lock()
	since := c.r.revCall[rev]
	c.r.mu.Unlock()
	call := c.r.now()
	in := Input{Kind: KindWatch, Watch: w, Status: status, From: rev}
	c.r.count(c.name, in, call)
	// A point: the start takes the revision it was given as current.
	c.r.log(Op{Client: c.id, Name: c.name, Input: in, Output: Output{Outcome: OK}, Call: call, Return: call + 1})
	return w, in, call, since
}

// watchEnd logs a watch's end. Its interval is the watch's whole life.
func (c *client) watchEnd(start Input, call time.Duration, err error) {
	in := start
	in.Kind = KindWatchEnd
	out := Output{Outcome: OK}
	end := c.r.now()
	if err != nil {
		out = Output{Outcome: Unknown, Err: err.Error()}
		if c.r.tooOld(err) {
			out.Outcome = TooOld
			in.Window = c.r.outsideWindow(start.From, end)
		}
	}
	c.r.log(Op{Client: c.id, Name: c.name, Input: in, Output: out, Call: call, Return: end})
}

// WatchRecords logs the watch's start, every batch it delivers (each a
// point of its own: see stepRecordsEvent), and its end.
func (c *client) WatchRecords(ctx context.Context, rev int64, fn func([]versiongate.Record, int64)) error {
	w, start, call, since := c.watchStart(false, rev)
	from := rev
	err := c.s.WatchRecords(ctx, rev, func(changes []versiongate.Record, r int64) {
		batch := make([]versiongate.Record, len(changes))
		for i, ch := range changes {
			batch[i] = versiongate.Record{ID: ch.ID, Value: slices.Clone(ch.Value)}
		}
		// An event may have taken effect at any time before it was
		// delivered, even before the watch started: its interval opens
		// where its start revision was first reported.
		c.r.log(Op{Client: c.id, Name: c.name, Input: Input{Kind: KindRecordsEvent, Watch: w, From: from, Lingers: c.r.lingers},
			Output: Output{Outcome: OK, Records: batch, Rev: r}, Call: since, Return: c.r.now()})
		from = max(from, r)
		fn(changes, r)
	})
	c.watchEnd(start, call, err)
	return err
}

// WatchStatus logs the watch's start, every status it delivers, and its
// end, as WatchRecords does.
func (c *client) WatchStatus(ctx context.Context, rev int64, fn func(versiongate.StoredStatus) bool) error {
	w, start, call, since := c.watchStart(true, rev)
	from := rev
	err := c.s.WatchStatus(ctx, rev, func(st versiongate.StoredStatus) bool {
		c.r.log(Op{Client: c.id, Name: c.name, Input: Input{Kind: KindStatusEvent, Watch: w, Status: true, From: from},
			Output: Output{Outcome: OK, Value: string(st.Value), Exists: st.Value != nil, Rev: st.Revision}, Call: since, Return: c.r.now()})
		from = max(from, st.Revision)
		return fn(st)
	})
	c.watchEnd(start, call, err)
	return err
}

// stepWatch is step for the watch operations; ok is false for an
// operation of another kind.
func stepWatch(s *state, in Input, out Output) (next []*state, ok bool) {
	switch in.Kind {
	case KindWatch:
		// A watch starts from a revision some operation reported before
		// it: the caller had it from a listing, a read, a publish or an
		// earlier event. One above every reported revision was
		// fabricated (or comes from a read the model did not see).
		if in.From > s.rev {
			return nil, true
		}
		return []*state{s}, true
	case KindRecordsEvent:
		return stepRecordsEvent(s, in, out), true
	case KindStatusEvent:
		// A status after the watch's position, current at some point
		// before it was delivered: the value then, at a revision not
		// below any reported before that point.
		if out.Rev <= in.From || out.Rev < s.rev || out.Exists != s.exists || out.Value != s.status {
			return nil, true
		}
		n := s.clone()
		n.rev = out.Rev
		return []*state{n.freeze()}, true
	case KindWatchEnd:
		// Only a "too old" end is logged as an operation (see
		// operations): its start revision must be one the history moved
		// on from, or, with a window of history, one the recorder found
		// outside it.
		if out.Outcome == TooOld && in.From > s.compacted && !in.Window {
			return nil, true
		}
		return []*state{s}, true
	case KindMovedOn:
		n := s.clone()
		n.compacted = max(s.compacted, s.rev)
		return []*state{n.freeze()}, true
	}
	return nil, false
}

// stepRecordsEvent checks a batch of record changes at out.Rev, after the
// watch's position in.From, as a partial listing at out.Rev: the batch is
// current at some point (its revision is at least every one reported
// before that point), each record it shows created is the model's record
// of that ID with that value, created after in.From and at most at
// out.Rev (no replayed event, no change that never happened), and every
// record the model knows to be created in (in.From, out.Rev] is in it (no
// skipped event). Revisions never go back: a batch below the watch's
// position is refused.
//
// A deletion is applied: the record it shows deleted is gone from that
// point on, so a later operation that shows it (a listing, a keep-alive,
// a batch that shows it created) is refused, as is a deletion reported
// before it happened, or after the record was created again. A record of
// unknown revision is left in place (the deletion may be of an earlier
// record of the ID). Every deletion the model knows to have come after
// in.From is in the batch: a record the model removed before this point
// was deleted at a revision no higher than out.Rev (the batch is current
// there), and above the revision it was created at (state.gone), so if
// that is at least in.From, the batch shows the ID (no skipped or delayed
// deletion). On a store whose deletions a watch may report late
// (Input.Lingers: the Kubernetes store holds a deletion its heartbeat
// does not yet confirm), that last check is waived.
func stepRecordsEvent(s *state, in Input, out Output) []*state {
	if out.Rev < in.From || out.Rev < s.rev {
		return nil
	}
	last := map[string]versiongate.Record{}
	for _, ch := range out.Records {
		last[ch.ID] = ch
	}
	n := s.clone()
	n.rev = out.Rev
	for id, ch := range last {
		m, ok := s.records[id]
		if ch.Value == nil {
			if ok && m.modRev != 0 {
				n.remove(id)
			}
			continue
		}
		if !ok || m.value != string(ch.Value) {
			return nil
		}
		if m.modRev != 0 && (m.modRev <= max(in.From, in.CreatedAfter) || m.modRev > out.Rev) {
			return nil
		}
	}
	for id, m := range s.records {
		if _, shown := last[id]; !shown && m.modRev > in.From && m.modRev <= out.Rev {
			return nil
		}
	}
	if !in.Lingers {
		for id, created := range s.gone {
			if _, shown := last[id]; shown || created < in.From {
				continue
			}
			if m, ok := s.records[id]; ok && m.modRev == 0 {
				continue // created again, at an unknown revision
			}
			return nil
		}
	}
	return []*state{n.freeze()}
}
