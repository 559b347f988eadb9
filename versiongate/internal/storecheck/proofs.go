package storecheck

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Seed is a driver's seed: VERSIONGATE_SEED when set, else the time. It is
// logged with the command line that replays it.
func Seed(t testing.TB) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("VERSIONGATE_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("VERSIONGATE_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (rerun with VERSIONGATE_SEED=%d)", seed, seed)
	return seed
}

// ProveJoiners runs RunJoiners on b and requires what a correct store
// gives: no violation, at least one joiner after the restrict, at least
// one conditioned write refused (the joiner raced in before the restrict
// must be seen), and a linearizable history.
func ProveJoiners(t *testing.T, b Backend, cfg JoinersConfig) {
	t.Helper()
	res := RunJoiners(t, b, cfg)
	if res.Violations != 0 {
		t.Errorf("joiners: %d violations", res.Violations)
	}
	if res.AfterRestrict == 0 {
		t.Errorf("joiners: no joiner came after the restrict")
	}
	if res.Refused == 0 {
		t.Errorf("joiners: no restricting write was refused: the joiner published just before it did not race it")
	}
	Check(t, res.History)
}

// ProveStaleCacheFails runs RunJoiners on b with joiners that read from a
// cache of b.Observer taken before the restrict, as an informer's would
// be, and requires that the race fails: violations, and a history the
// checker rejects. It shows the drivers and the checker can fail.
func ProveStaleCacheFails(t *testing.T, b Backend, cfg JoinersConfig) {
	t.Helper()
	cfg.Joiner = NewStale(b.Observer).Reader
	res := RunJoiners(t, b, cfg)
	if res.Violations == 0 {
		t.Errorf("joiners reading a stale cache: no violation")
	}
	r, path, err := Verify(res.History, t.TempDir())
	switch {
	case err != nil:
		t.Errorf("verifying the history: %v", err)
	case r != porcupine.Illegal:
		t.Errorf("the history of joiners reading a stale cache was judged %v, want illegal", r)
	default:
		t.Logf("history rejected; visualization %s", path)
	}
}
