package servers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/internal/servers"
	"github.com/reconkit/reconkit/internal/testenv"
)

// An apiserver that never comes up is an error naming each port tried,
// with its etcd stopped; nothing panics on the way out.
func TestStartAPIServerThatCannotStartFails(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real etcd (internal/testenv); skipped under -short")
	}
	bins := testenv.Binaries(t)
	bins.KubeAPIServer = "/bin/false" // exits at once, as a binary that cannot bind does
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := servers.StartAPIServer(ctx, servers.APIServerOptions{Binaries: bins})
	require.Error(t, err)
	require.Nil(t, a)
	require.Equal(t, 3, strings.Count(err.Error(), "port "), "each of the three ports tried: %v", err)
}
