package kubestore

// SetReaperIdentity sets the identity s holds the reaper Lease as, so
// that tests can make two Stores hold it at once.
func SetReaperIdentity(s *Store, id string) { s.identity = id }

// ReaperIdentity is the identity s holds the reaper Lease as.
func ReaperIdentity(s *Store) string { return s.identity }
