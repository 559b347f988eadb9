package servers

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ProcStat is a server process's resource use as Linux reports it.
type ProcStat struct {
	// CPU is user plus system time since the process started.
	CPU time.Duration
	// RSS is the resident set size now.
	RSS uint64
}

// Stat returns the apiserver's resource use (Linux only).
func (a *APIServer) Stat() (ProcStat, error) {
	a.mu.Lock()
	p := a.proc
	a.mu.Unlock()
	return procStat(p)
}

// Stat returns the member's resource use (Linux only).
func (m *Member) Stat() (ProcStat, error) { return procStat(m.current()) }

// clockTicks is USER_HZ, 100 on every Linux platform Go supports.
const clockTicks = 100

func procStat(p *process) (ProcStat, error) {
	if p == nil || p.exited() {
		return ProcStat{}, fmt.Errorf("servers: process is not running")
	}
	return pidStat(strconv.Itoa(p.cmd.Process.Pid))
}

// SelfStat returns this process's resource use (Linux only): what a
// benchmark's clients cost, apart from the servers'.
func SelfStat() (ProcStat, error) { return pidStat("self") }

func pidStat(pid string) (ProcStat, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return ProcStat{}, fmt.Errorf("servers: reading process stats: %w", err)
	}
	return parseStat(string(b), os.Getpagesize())
}

// parseStat parses a /proc/<pid>/stat line.
func parseStat(s string, pageSize int) (ProcStat, error) {
	// The command name (field 2) may hold spaces and parentheses: fields
	// are counted after its last closing parenthesis.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ProcStat{}, fmt.Errorf("servers: malformed process stats %q", s)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15, rss
	// (in pages) field 24.
	if len(f) < 22 {
		return ProcStat{}, fmt.Errorf("servers: short process stats %q", s)
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	rss, err3 := strconv.ParseUint(f[21], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return ProcStat{}, fmt.Errorf("servers: malformed process stats %q", s)
	}
	return ProcStat{
		CPU: time.Duration(utime+stime) * time.Second / clockTicks,
		RSS: rss * uint64(pageSize),
	}, nil
}
