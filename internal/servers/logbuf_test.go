package servers

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLogBufferKeepsTheTail(t *testing.T) {
	b := newLogBuffer(64)
	for i := 0; i < 100; i++ {
		b.Write([]byte(strings.Repeat("x", 9) + "\n"))
	}
	b.Write([]byte("last line\n"))
	require.LessOrEqual(t, len(b.buf), 64)
	require.Equal(t, "last line", b.Tail(1))
	require.Equal(t, "xxxxxxxxx\nlast line", b.Tail(2))
}

func TestFreePortsAreDistinct(t *testing.T) {
	ports, err := freePorts(6)
	require.NoError(t, err)
	seen := map[int]bool{}
	for _, p := range ports {
		require.False(t, seen[p])
		seen[p] = true
	}
}
