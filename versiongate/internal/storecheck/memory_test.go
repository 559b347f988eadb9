package storecheck_test

import (
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/election/electiontest"
	"github.com/reconkit/reconkit/versiongate/internal/storecheck"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// memoryBackend is the in-memory store (on the real clock) with the
// in-memory election: a partition cuts the node's store connection and its
// candidate; a crash cuts the connection for good and kills the term.
func memoryBackend() storecheck.Backend {
	s := versiongatetest.NewStore(versiongatetest.StoreConfig{})
	el := electiontest.NewElection()
	var mu sync.Mutex
	conns := map[string]*versiongatetest.Conn{}
	cands := map[string]*electiontest.Candidate{}
	return storecheck.Backend{
		Observer: s.Conn(),
		Connect: func(_ testing.TB, node string) storecheck.Conn {
			c, cand := s.Conn(), el.NewCandidate(node)
			mu.Lock()
			conns[node], cands[node] = c, cand
			mu.Unlock()
			return storecheck.Conn{Store: c, Candidate: cand, Close: func(crash bool) {
				if crash {
					c.Cut()
					cand.Kill()
				}
				_ = cand.Close()
			}}
		},
		Partition: func(node string, cut bool) {
			mu.Lock()
			c, cand := conns[node], cands[node]
			mu.Unlock()
			if cut {
				c.Cut()
				cand.Partition()
			} else {
				c.Heal()
				cand.Heal()
			}
		},
	}
}

func seed(t *testing.T) uint64 {
	s := uint64(time.Now().UnixNano())
	t.Logf("seed %d", s)
	return s
}

func TestRollingOnMemoryStore(t *testing.T) {
	cfg := storecheck.RollingConfig{Seed: seed(t), Nodes: 5, Steps: 30}
	if testing.Short() {
		cfg.Steps = 12
	}
	storecheck.RunRolling(t, memoryBackend(), cfg)
}

func TestJoinersOnMemoryStore(t *testing.T) {
	res := storecheck.RunJoiners(t, memoryBackend(), storecheck.JoinersConfig{Seed: seed(t), ListDelay: 50 * time.Millisecond, WatchDelay: 20 * time.Millisecond})
	require.Zero(t, res.Violations)
	require.NotZero(t, res.AfterRestrict, "joiners came after the restrict")
	storecheck.Check(t, res.History)
}

// The variant that can fail: joiners reading from a cache taken before the
// restrict serve past it, and the checker rejects their history too.
func TestJoinersOnStaleCacheFail(t *testing.T) {
	b := memoryBackend()
	cache := storecheck.NewStale(b.Observer)
	res := storecheck.RunJoiners(t, b, storecheck.JoinersConfig{Seed: seed(t), ListDelay: 50 * time.Millisecond, Joiner: cache.Reader})
	require.NotZero(t, res.Violations)
	r, path, err := storecheck.Verify(res.History, t.TempDir())
	require.NoError(t, err)
	require.Equal(t, porcupine.Illegal, r)
	t.Logf("history rejected; visualization %s", path)
}
