package versiongate

// SetBeforeRecordRead makes the goroutine that follows the node record
// during a readiness wait (waitRecord's, in WaitReady and in the
// readiness condition) call fn before each of its reads of the record, so
// that a test can hold it back as a starved goroutine is held. Call it
// before Run and WaitReady.
func SetBeforeRecordRead(g *Gate, fn func()) { g.beforeRecordRead = fn }

// RecordRevision returns the revision at which g's node record was
// published, and whether g counts that record as valid now.
func RecordRevision(g *Gate) (rev int64, valid bool) {
	st, _ := g.record.Load()
	return st.rev, g.recordValid(st)
}
