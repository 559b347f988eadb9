package versiongate_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// grantingStore grants leases as a store whose records are kept alive by
// another, longer lease (the Kubernetes store on node Leases): TTL left
// from an earlier renewal, and the full duration in Granted.
type grantingStore struct {
	versiongate.Store
	left, granted time.Duration
}

func (s grantingStore) PublishRecord(ctx context.Context, id string, value []byte, ttl time.Duration) (versiongate.RecordLease, error) {
	l, err := s.Store.PublishRecord(ctx, id, value, ttl)
	l.TTL, l.Granted = s.left, s.granted
	return l, err
}

func (s grantingStore) KeepAlive(ctx context.Context, l versiongate.RecordLease) (time.Duration, error) {
	if _, err := s.Store.KeepAlive(ctx, l); err != nil {
		return 0, err
	}
	return s.left, nil
}

// The gate's safety margin comes from the lease as the store granted it,
// the duration the store's expiry adds its own margin to, not from the
// RecordTTL asked for: with 40s node Leases and 10s records, the gate
// stops counting on its record 4s before the lease ends, not 1s, so the
// slack before an observer can judge the record dead is twice 4s.
func TestMarginFromTheGrantedLease(t *testing.T) {
	for _, tc := range []struct {
		name          string
		left, granted time.Duration
		want          time.Duration
	}{
		{name: "node Lease", left: 30 * time.Second, granted: 40 * time.Second, want: 26 * time.Second},
		{name: "own lease", left: 10 * time.Second, want: 9 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newMemCluster(t)
			n := c.node("a", "1.0.0", "1.0.0", -1, func(cfg *versiongate.Config) {
				cfg.Store = grantingStore{Store: cfg.Store, left: tc.left, granted: tc.granted}
				cfg.RecordTTL = 10 * time.Second
			})
			n.run(t)
			require.NoError(t, versiongatetest.Wait(context.Background(), "the record published", func() bool { return len(c.store.Records()) == 1 }, nil))
			c.stepRecord(10 * time.Second / 3)
			require.NoError(t, versiongatetest.Wait(context.Background(), "a keep-alive", func() bool {
				return len(n.rec.observations(versiongate.EventKeepAlive)) > 0
			}, nil))
			require.Equal(t, tc.want, n.rec.observations(versiongate.EventKeepAlive)[0].ValidFor)
		})
	}
}
