package storecheck

import (
	"context"
	"slices"
	"sync"

	"github.com/reconkit/reconkit/versiongate"
)

// The defects below break a watch's promises; the checker must reject
// their histories (TestWatchDefectsRejected), and tests use them to prove
// that it can.

// SkipWatchEvent returns s with a defect: its record watches drop the
// n-th record change they deliver (counted from 1 across the watches of
// s), and a batch left empty.
func SkipWatchEvent(s versiongate.Store, n int) versiongate.Store {
	return &skipEvent{Store: s, n: n}
}

type skipEvent struct {
	versiongate.Store
	n    int
	mu   sync.Mutex
	seen int
}

func (s *skipEvent) WatchRecords(ctx context.Context, rev int64, fn func([]versiongate.Record, int64)) error {
	return s.Store.WatchRecords(ctx, rev, func(changes []versiongate.Record, r int64) {
		var kept []versiongate.Record
		for _, ch := range changes {
			s.mu.Lock()
			s.seen++
			drop := s.seen == s.n
			s.mu.Unlock()
			if !drop {
				kept = append(kept, ch)
			}
		}
		if len(kept) > 0 {
			fn(kept, r)
		}
	})
}

// ReplayWatchEvent returns s with a defect: each batch its record watches
// deliver after the first carries the previous batch's changes again, and
// each status its status watches deliver after the first is followed by
// the one before it, at its old revision.
func ReplayWatchEvent(s versiongate.Store) versiongate.Store { return replayEvent{s} }

type replayEvent struct{ versiongate.Store }

func (s replayEvent) WatchRecords(ctx context.Context, rev int64, fn func([]versiongate.Record, int64)) error {
	var prev []versiongate.Record
	return s.Store.WatchRecords(ctx, rev, func(changes []versiongate.Record, r int64) {
		batch := append(append([]versiongate.Record(nil), prev...), changes...)
		prev = changes
		fn(batch, r)
	})
}

func (s replayEvent) WatchStatus(ctx context.Context, rev int64, fn func(versiongate.StoredStatus) bool) error {
	var prev *versiongate.StoredStatus
	return s.Store.WatchStatus(ctx, rev, func(st versiongate.StoredStatus) bool {
		if fn(st) {
			return true
		}
		if prev != nil && fn(*prev) {
			return true
		}
		prev = &st
		return false
	})
}

// FabricatedWatchStart returns s with a defect: its watches start ahead
// revisions after the one they are given, at a revision no operation
// reported, and miss the changes in between.
func FabricatedWatchStart(s versiongate.Store, ahead int64) versiongate.Store {
	return fabricatedStart{s, ahead}
}

type fabricatedStart struct {
	versiongate.Store
	ahead int64
}

func (s fabricatedStart) WatchRecords(ctx context.Context, rev int64, fn func([]versiongate.Record, int64)) error {
	return s.Store.WatchRecords(ctx, rev+s.ahead, fn)
}

func (s fabricatedStart) WatchStatus(ctx context.Context, rev int64, fn func(versiongate.StoredStatus) bool) error {
	return s.Store.WatchStatus(ctx, rev+s.ahead, fn)
}

// StatusOwnRevision returns s with the herd defect the Kubernetes store
// once had: ReadStatus reports the revision at which the status last
// changed (the status Lease's own resourceVersion) instead of the
// store's revision at the read. Once the history moved on, a watch from
// it starts where the server may no longer serve it (410 Gone at every
// attempt after a restart): the read reports a revision below one
// reported before it, and the checker refuses it.
func StatusOwnRevision(s versiongate.Store) versiongate.Store { return ownRevision{s} }

type ownRevision struct{ versiongate.Store }

func (s ownRevision) ReadStatus(ctx context.Context) (versiongate.StoredStatus, error) {
	st, err := s.Store.ReadStatus(ctx)
	if err != nil || st.Value == nil {
		return st, err
	}
	// The status' own revision: the first a watch from the start
	// reports (at once, the status existing).
	own := st.Revision
	werr := s.Store.WatchStatus(ctx, 0, func(w versiongate.StoredStatus) bool {
		own = w.Revision
		return true
	})
	if werr != nil {
		return versiongate.StoredStatus{}, werr
	}
	st.Revision = min(st.Revision, own)
	return st, nil
}

// DropWatchDeletions returns s with a defect: its record watches never
// report a deletion (and drop a batch left empty), as a watch that only
// follows creations would.
func DropWatchDeletions(s versiongate.Store) versiongate.Store { return dropDeletions{s} }

type dropDeletions struct{ versiongate.Store }

func (s dropDeletions) WatchRecords(ctx context.Context, rev int64, fn func([]versiongate.Record, int64)) error {
	return s.Store.WatchRecords(ctx, rev, func(changes []versiongate.Record, r int64) {
		var kept []versiongate.Record
		for _, ch := range changes {
			if ch.Value != nil {
				kept = append(kept, ch)
			}
		}
		if len(kept) > 0 {
			fn(kept, r)
		}
	})
}

// DelayWatchDeletions returns s with a defect: its record watches hold
// each deletion back and report it in a batch of its own after the next
// batch, at that batch's revision: out of revision order, after a later
// change.
func DelayWatchDeletions(s versiongate.Store) versiongate.Store { return delayDeletions{s} }

type delayDeletions struct{ versiongate.Store }

func (s delayDeletions) WatchRecords(ctx context.Context, rev int64, fn func([]versiongate.Record, int64)) error {
	var held []versiongate.Record
	return s.Store.WatchRecords(ctx, rev, func(changes []versiongate.Record, r int64) {
		var batch, next []versiongate.Record
		for _, ch := range changes {
			if ch.Value == nil {
				next = append(next, ch)
			} else {
				batch = append(batch, ch)
			}
		}
		if len(batch) > 0 {
			fn(batch, r)
			if len(held) > 0 {
				fn(held, r)
			}
			held = nil
		}
		held = append(held, next...)
	})
}

// FabricatedWatchDeletion returns s with a defect: its record watches
// report the record id deleted, with the next batch after the one that
// showed it created, though nothing deleted it.
func FabricatedWatchDeletion(s versiongate.Store, id string) versiongate.Store {
	return fabricatedDeletion{s, id}
}

type fabricatedDeletion struct {
	versiongate.Store
	id string
}

func (s fabricatedDeletion) WatchRecords(ctx context.Context, rev int64, fn func([]versiongate.Record, int64)) error {
	seen, done := false, false
	return s.Store.WatchRecords(ctx, rev, func(changes []versiongate.Record, r int64) {
		batch := changes
		if seen && !done {
			batch = append(slices.Clone(changes), versiongate.Record{ID: s.id})
			done = true
		}
		for _, ch := range changes {
			if ch.ID == s.id && ch.Value != nil {
				seen = true
			}
		}
		fn(batch, r)
	})
}

// AnswerTooOld returns s with a defect: its watches end at once with err
// (the store's "too old" error), whatever revision they are given, as a
// server that claims it no longer has history it still had to keep.
func AnswerTooOld(s versiongate.Store, err error) versiongate.Store { return answerTooOld{s, err} }

type answerTooOld struct {
	versiongate.Store
	err error
}

func (s answerTooOld) WatchRecords(context.Context, int64, func([]versiongate.Record, int64)) error {
	return s.err
}

func (s answerTooOld) WatchStatus(context.Context, int64, func(versiongate.StoredStatus) bool) error {
	return s.err
}
