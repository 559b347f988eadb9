package servers_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/reconkit/reconkit/internal/servers"
)

// Builds leave one cache entry per source hash; PruneUnused removes those
// no build has touched for a week, never the one in use.
func ExamplePruneUnused() {
	cache, err := os.MkdirTemp("", "servers-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(cache)
	old := time.Now().Add(-servers.UnusedEntryLifetime - time.Hour)
	for _, e := range []struct {
		name string
		used time.Time
	}{{"etcd-v3.7.3-aaaa", old}, {"etcd-v3.7.3-bbbb", time.Now()}, {"etcd-v3.7.3-cccc", old}} {
		dir := filepath.Join(cache, e.name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			fmt.Println(err)
			return
		}
		if err := os.Chtimes(dir, e.used, e.used); err != nil {
			fmt.Println(err)
			return
		}
	}

	// cccc is the entry this build uses: it stays however old it looks.
	servers.PruneUnused(cache, "etcd", filepath.Join(cache, "etcd-v3.7.3-cccc"), nil)
	left, _ := os.ReadDir(cache)
	for _, e := range left {
		fmt.Println(e.Name())
	}
	// Output:
	// etcd-v3.7.3-bbbb
	// etcd-v3.7.3-cccc
}
