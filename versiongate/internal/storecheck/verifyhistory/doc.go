// Command verifyhistory checks one store history for linearizability
// against storecheck's model: it reads a storecheck.ChildRequest as JSON
// on its standard input and writes a storecheck.ChildResult. A test binary
// built with the race detector checks its larger histories in it, built
// without the race detector (see storecheck.Verify): once per test binary
// when its TestMain uses storecheck.WithVerifier, else once per history.
// Every failure is reported in the answer's Err, never by the exit status,
// so that the test reading it says what went wrong.
//
// By hand, it checks again a history a test kept (history.json beside a
// visualization, or undecided-*.json), with the default search bound:
//
//	go run ./versiongate/internal/storecheck/verifyhistory < history.json
package main
