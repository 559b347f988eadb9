package kubestore

import (
	"context"

	"github.com/reconkit/reconkit/versiongate"
)

// SetReaperIdentity sets the identity s holds the reaper Lease as, so
// that tests can make two Stores hold it at once.
func SetReaperIdentity(s *Store, id string) { s.identity = id }

// ReaperIdentity is the identity s holds the reaper Lease as.
func ReaperIdentity(s *Store) string { return s.identity }

// Reaped is how many records s's reaper deleted that its watch has not
// yet shown deleted.
func Reaped(s *Store) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reaped)
}

// Seen reports what s's listings and watches last showed of record id:
// whether it is known, deleted, and its stored value.
func Seen(s *Store, id string) (known, deleted bool, value []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.seen.recs[id]
	if e == nil {
		return false, false, nil
	}
	return true, e.deleted, e.value
}

// Covered is the revision up to which s's listings and watches applied
// every change.
func Covered(s *Store) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen.covered
}

// ListRecordsHeld is ListRecords, also returning the IDs of the records
// it lists as held (seen deleted while their heartbeats may be renewed):
// storecheck's recorder marks them in the history (storecheck.HeldLister).
func (s *Store) ListRecordsHeld(ctx context.Context) ([]versiongate.Record, int64, []string, error) {
	return s.listHeld(ctx)
}

// Validate is WriteStatus' validation of a status write conditioned on
// nodesRev: why it must not stand, or "".
func Validate(ctx context.Context, s *Store, nodesRev int64) (string, error) {
	return s.validate(ctx, nodesRev)
}
