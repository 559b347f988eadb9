package etcd_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/etcd"
	"github.com/reconkit/reconkit/internal/testenv"
)

// reportQuantiles reports the median, p99 and maximum of ds in seconds.
func reportQuantiles(b *testing.B, prefix string, ds []time.Duration) {
	slices.Sort(ds)
	q := func(p float64) float64 {
		i := int(p*float64(len(ds)-1) + 0.5)
		return ds[i].Seconds()
	}
	b.ReportMetric(q(0.5), prefix+"-p50-s")
	b.ReportMetric(q(0.99), prefix+"-p99-s")
	b.ReportMetric(ds[len(ds)-1].Seconds(), prefix+"-max-s")
	b.ReportMetric(float64(len(ds)), prefix+"-samples")
}

// BenchmarkEtcdHandover measures graceful handover under Run: the leader's
// lead returns, Run resigns, and the time until the successor's lead
// starts is recorded. Two candidates alternate. At least 50 handovers run
// whatever b.N is; use -benchtime=200x for more.
func BenchmarkEtcdHandover(b *testing.B) {
	srv := testenv.Etcd(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rounds := max(b.N, 50)

	var mu sync.Mutex
	var resigned time.Time
	var samples []time.Duration
	started := make(chan struct{}, 1)
	lead := func(ctx context.Context, l election.Leadership) error {
		now := time.Now()
		mu.Lock()
		if !resigned.IsZero() {
			samples = append(samples, now.Sub(resigned))
		}
		done := len(samples) >= rounds
		mu.Unlock()
		started <- struct{}{}
		if done {
			<-ctx.Done()
			return nil
		}
		// Hold the term briefly, then hand over.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(5 * time.Millisecond):
		}
		mu.Lock()
		resigned = time.Now()
		mu.Unlock()
		return nil
	}
	var wg sync.WaitGroup
	for _, id := range []string{"a", "b"} {
		e, err := etcd.New(etcd.Config{Client: srv.Client(b), Prefix: "/bench-handover", Identity: id})
		require.NoError(b, err)
		defer e.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A candidate that stepped down pauses before it campaigns
			// again (so a lead that returns at once cannot spin); the
			// pause is kept below the 5 ms hold so the other candidate
			// is always campaigning when a term is handed over.
			_ = election.Run(ctx, e, lead, election.WithRetryInterval(time.Millisecond, 2*time.Millisecond))
		}()
	}
	b.ResetTimer()
	for {
		<-started
		mu.Lock()
		n := len(samples)
		mu.Unlock()
		if n >= rounds {
			break
		}
	}
	b.StopTimer()
	cancel()
	wg.Wait()
	reportQuantiles(b, "handover", samples)
}

// BenchmarkEtcdCrashFailover measures how long a successor takes to lead
// after the leader's process is killed with SIGKILL (no release), at a
// random moment of its renewal cycle, against the bound: session TTL plus
// one round trip, plus the up to 500ms etcd takes to notice an expired
// lease. One failover per iteration; use -benchtime=20x.
func BenchmarkEtcdCrashFailover(b *testing.B) {
	srv := testenv.Etcd(b)
	cli := srv.Client(b)
	const ttl = 2 * time.Second
	var rtts []time.Duration
	for range 20 {
		start := time.Now()
		_, err := cli.Get(context.Background(), "/rtt")
		require.NoError(b, err)
		rtts = append(rtts, time.Since(start))
	}
	slices.Sort(rtts)
	rtt := rtts[len(rtts)/2]

	var samples []time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		prefix := "/bench-crash/" + string(rune('a'+i%26)) + time.Now().Format("150405.000000")
		b.StartTimer()
		d, _, _ := crashFailover(b, cli, srv.Endpoints()[0], prefix, ttl, rand.N(ttl/3))
		samples = append(samples, d)
	}
	b.StopTimer()
	reportQuantiles(b, "failover", samples)
	b.ReportMetric((ttl + rtt).Seconds(), "bound-ttl+rtt-s")
	b.ReportMetric((ttl + 500*time.Millisecond + rtt).Seconds(), "bound-ttl+expirycheck+rtt-s")
}
