package servers

import (
	"runtime"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// A command name with a space and a parenthesis; utime 150, stime 50
	// ticks; rss 10 pages.
	line := "42 (a b) c) S 1 42 42 0 -1 4194304 100 0 0 0 150 50 0 0 20 0 8 0 100 1000000 10 18446744073709551615"
	got, err := parseStat(line, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if want := (ProcStat{CPU: 2 * time.Second, RSS: 40960}); got != want {
		t.Errorf("parseStat = %+v, want %+v", got, want)
	}
	if _, err := parseStat("42 (x) S 1", 4096); err == nil {
		t.Error("parseStat of a short line: no error")
	}
	if runtime.GOOS != "linux" {
		return
	}
	if _, err := SelfStat(); err != nil {
		t.Errorf("SelfStat: %v", err)
	}
}
