package election

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDefaultIdentityUnique(t *testing.T) {
	a, b := DefaultIdentity(), DefaultIdentity()
	require.NotEqual(t, a, b)
	i := strings.LastIndexByte(a, '_')
	require.Positive(t, i)
	require.Len(t, a[i+1:], 16)
}
