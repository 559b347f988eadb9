package servers

import (
	"bytes"
	"strings"
	"sync"
)

// logBuffer keeps the tail of a process's output so that a failure can show
// the server's last words.
type logBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func newLogBuffer(max int) *logBuffer { return &logBuffer{max: max} }

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

// Tail returns up to n last complete lines.
func (b *logBuffer) Tail(n int) string {
	b.mu.Lock()
	data := bytes.TrimRight(b.buf, "\n")
	b.mu.Unlock()
	lines := strings.Split(string(data), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
