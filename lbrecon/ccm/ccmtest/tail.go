package ccmtest

import "sync"

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			if n--; n < 0 {
				return s[i+1:]
			}
		}
	}
	return s
}
