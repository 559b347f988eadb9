package storecheck

import (
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

// recordingTB is a testing.TB whose failures are recorded, not reported.
type recordingTB struct {
	testing.TB
	errs []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// A history the search leaves undecided is searched again, with the
// longer bound, and one still undecided fails the test: a check that
// could not look proves nothing. One decided on the second search passes
// or fails as decided.
func TestUndecidedHistoryFails(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers []porcupine.CheckResult
		fails   bool
	}{
		{"undecided twice", []porcupine.CheckResult{porcupine.Unknown, porcupine.Unknown}, true},
		{"decided linearizable on the retry", []porcupine.CheckResult{porcupine.Unknown, porcupine.Ok}, false},
		{"decided illegal on the retry", []porcupine.CheckResult{porcupine.Unknown, porcupine.Illegal}, true},
		{"decided at once", []porcupine.CheckResult{porcupine.Ok}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bounds []time.Duration
			verify := func(_ []Op, _ string, timeout time.Duration) (porcupine.CheckResult, string, error) {
				bounds = append(bounds, timeout)
				return tc.answers[len(bounds)-1], "", nil
			}
			rec := &recordingTB{TB: t}
			check(rec, nil, time.Second, time.Minute, verify)
			require.Equal(t, tc.fails, len(rec.errs) > 0, "failures: %q", rec.errs)
			require.Equal(t, []time.Duration{time.Second, time.Minute}[:len(tc.answers)], bounds, "the searches' bounds")
		})
	}
}
