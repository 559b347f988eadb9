package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/internal/testenv"
)

// reportLog is an election.Metrics and an election.EventRecorder that
// keeps the observations and the events of one elector in the order they
// were made, and closes ended at the first observation of a term's end.
type reportLog struct {
	mu     sync.Mutex
	obs    []election.Observation
	events []string // "eventtype reason"
	ended  chan struct{}
	once   sync.Once
}

func newReportLog() *reportLog { return &reportLog{ended: make(chan struct{})} }

func (r *reportLog) Observe(o election.Observation) {
	r.mu.Lock()
	r.obs = append(r.obs, o)
	r.mu.Unlock()
	if o.Event == election.EventLost || o.Event == election.EventResigned {
		r.once.Do(func() { close(r.ended) })
	}
}

func (r *reportLog) Event(eventtype, reason, _ string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, eventtype+" "+reason)
}

func (r *reportLog) observations() []election.Observation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]election.Observation(nil), r.obs...)
}

func (r *reportLog) recorded() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// checkStartsFirst returns an error unless every observation of a term
// follows the term's EventAcquired, and a term's EventLost or
// EventResigned is its last.
func checkStartsFirst(obs []election.Observation) error {
	started := map[election.Token]bool{}
	ended := map[election.Token]bool{}
	for i, o := range obs {
		switch {
		case ended[o.Token]:
			return fmt.Errorf("observation %d, %s of token %d, after the term's end: %v", i, o.Event, o.Token, obs)
		case o.Event == election.EventAcquired:
			if started[o.Token] {
				return fmt.Errorf("observation %d: token %d acquired twice: %v", i, o.Token, obs)
			}
			started[o.Token] = true
		case !started[o.Token]:
			return fmt.Errorf("observation %d, %s of token %d, before the term's start: %v", i, o.Event, o.Token, obs)
		case o.Event == election.EventLost || o.Event == election.EventResigned:
			ended[o.Token] = true
		}
	}
	return nil
}

// A term can end by itself (its key deleted, its session gone, its
// elector closed) the moment its renewal and monitor loops run, before
// Campaign has returned it. Its end must still be reported after its
// start: a host's "is leader" gauge set by the reports would otherwise
// read 1, and its LeaderElected event come last, for a candidate that no
// longer leads.
func TestEtcdReportsTermStartBeforeItsEnd(t *testing.T) {
	t.Parallel() // an etcd of its own; waits on the server, not the CPU
	srv := testenv.Etcd(t)
	admin := srv.Client(t)

	elector := func(t *testing.T, prefix string, log *reportLog) *Elector {
		e, err := New(Config{Client: srv.Client(t), Prefix: prefix, Identity: "a", SessionTTL: 10 * time.Second, Metrics: log, Events: log})
		require.NoError(t, err)
		t.Cleanup(func() { _ = e.Close() })
		return e
	}

	t.Run("key deleted as the term starts", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		log := newReportLog()
		e := elector(t, "/order-deleted", log)
		var hookErr error
		e.termStarted = func(l *Leadership) {
			if _, err := admin.Delete(ctx, l.Key()); err != nil {
				hookErr = fmt.Errorf("deleting the candidate key: %w", err)
				return
			}
			select {
			case <-log.ended:
			case <-ctx.Done():
				hookErr = errors.New("the term's loss was never reported")
			}
		}
		l, err := e.CampaignEtcd(ctx)
		require.NoError(t, hookErr)
		require.NoError(t, err)
		<-l.Context().Done() // reported ended: the loss came first
		require.ErrorIs(t, context.Cause(l.Context()), errCandidateKeyDeleted)
		require.False(t, e.Leading(), "leading after the term was lost")

		obs := log.observations()
		require.NoError(t, checkStartsFirst(obs))
		require.Equal(t, election.EventLost, obs[len(obs)-1].Event, "the last observation: %v", obs)
		require.Equal(t, l.Token(), obs[len(obs)-1].Token)
		require.Equal(t, []string{"Normal LeaderElected", "Warning LeadershipLost"}, log.recorded())
	})

	t.Run("elector closed as the term starts", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		log := newReportLog()
		e := elector(t, "/order-closed", log)
		e.termStarted = func(*Leadership) { _ = e.Close() } // waits for the term's loops
		l, err := e.CampaignEtcd(ctx)
		if err == nil {
			// Won before the close: the holder releases it.
			require.ErrorIs(t, context.Cause(l.Context()), election.ErrClosed)
			require.NoError(t, l.Resign(ctx))
		} else {
			require.ErrorIs(t, err, election.ErrClosed)
		}
		require.False(t, e.Leading(), "leading after Close")

		obs := log.observations()
		require.NoError(t, checkStartsFirst(obs))
		if len(obs) > 0 {
			require.Equal(t, election.EventResigned, obs[len(obs)-1].Event, "the last observation: %v", obs)
			require.Equal(t, []string{"Normal LeaderElected", "Normal Resigned"}, log.recorded())
		} else {
			require.Empty(t, log.recorded())
		}
	})
}
