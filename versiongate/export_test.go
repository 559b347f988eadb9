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

// SetAfterReady makes WaitReady call fn right after it set the node ready
// and before it checks that the record is still the one it waited on, so
// that a test can ask Ready at that moment. Call it before WaitReady.
func SetAfterReady(g *Gate, fn func()) { g.afterReady = fn }
