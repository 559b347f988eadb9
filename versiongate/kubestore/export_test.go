package kubestore

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
