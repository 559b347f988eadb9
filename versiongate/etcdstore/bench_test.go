package etcdstore_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

const benchNodes = 10000

// BenchmarkReleasesWatcherEtcd measures the watcher end to end on a real
// etcd holding 10,000 node records: b.N record changes are written in
// transactions of 100, and the clock stops when the watcher has published
// the last one. allocs/op covers the watcher, the etcd client and the
// writer together.
func BenchmarkReleasesWatcherEtcd(b *testing.B) {
	e := testenv.Etcd(b)
	cli := e.Client(b)
	ctx := context.Background()
	vals := make([]string, 3)
	for r := range vals {
		enc, err := versiongate.EncodeNodeRelease("x", versiongate.Version{Release: versiongate.Release{Major: 1, Minor: uint64(r)}})
		if err != nil {
			b.Fatal(err)
		}
		vals[r] = string(enc)
	}
	// The decoder below ignores the ID, so one encoding per release does.
	decode := func(_ string, value []byte) (versiongate.Release, bool, error) {
		_, v, err := versiongate.DecodeNodeRelease(value)
		return v.Release, err == nil, err
	}
	write := func(from, n, gen int) int64 {
		var rev int64
		for start := from; start < from+n; start += 100 {
			var ops []clientv3.Op
			for i := start; i < from+n && i < start+100; i++ {
				ops = append(ops, clientv3.OpPut(testNodesPrefix+"node-"+strconv.Itoa(i%benchNodes), vals[(i/benchNodes+gen)%3]))
			}
			resp, err := cli.Txn(ctx).Then(ops...).Commit()
			if err != nil {
				b.Fatal(err)
			}
			rev = resp.Header.Revision
		}
		return rev
	}
	write(0, benchNodes, 0)

	// The gate's watcher runs in Run; a store that reports each batch of
	// changes after the gate has taken it in (fn returns once the summary
	// is published) tells the benchmark when the last write is counted.
	st := &revReportingStore{Store: etcdStore(b, cli), kick: make(chan struct{}, 1)}
	g, err := versiongate.New(versiongate.Config{Store: st, NodeID: "bench", Version: versiongate.Version{Release: versiongate.Release{Major: 1, Minor: 2}},
		MinimumCompatibleRelease: versiongate.Release{Major: 1}, Decode: decode,
		Candidate: versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) { <-ctx.Done(); return nil, ctx.Err() }),
		Reconcile: func(context.Context, versiongate.Term) error { return nil }})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Run(rctx) }()
	defer func() { cancel(); recv(b, done, "Run's return") }()
	if err := versiongatetest.WaitNodes(ctx, g, benchNodes); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	last := write(0, b.N, 1)
	for st.rev.Load() < last {
		recv(b, st.kick, "the next event")
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkWaitReadyLatency measures the time from the write of a status
// that admits the node to WaitReady returning, with WaitReady already
// blocked on a status that does not. µs/ready includes the status write's
// own round trip, reported alone as µs/put.
func BenchmarkWaitReadyLatency(b *testing.B) {
	e := testenv.Etcd(b)
	cli := e.Client(b)
	blocked := make(chan struct{}, 1)
	log := funcr.New(func(_, args string) {
		if strings.Contains(args, "Not ready") {
			select {
			case blocked <- struct{}{}:
			default:
			}
		}
	}, funcr.Options{})
	ctx := logr.NewContext(context.Background(), log)
	g, err := versiongate.New(versiongate.Config{Store: etcdStore(b, cli), NodeID: "n1", Version: versiongate.Version{Release: versiongate.Release{Major: 1}},
		Decode: decodeRegistry})
	if err != nil {
		b.Fatal(err)
	}
	tooNew, _ := versiongate.Status{State: versiongate.StateDone, Version: versiongate.Version{Release: versiongate.Release{Major: 2}}, MinimumCompatibleRelease: versiongate.Release{Major: 2}}.Encode()
	ok, _ := versiongate.Status{State: versiongate.StateDone, Version: versiongate.Version{Release: versiongate.Release{Major: 1}}, MinimumCompatibleRelease: versiongate.Release{Major: 1}}.Encode()

	var total, putTime time.Duration
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		if _, err := cli.Put(ctx, testStatusKey, string(tooNew)); err != nil {
			b.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- g.WaitReady(ctx) }()
		recv(b, blocked, "WaitReady blocking")
		b.StartTimer()
		start := time.Now()
		if _, err := cli.Put(ctx, testStatusKey, string(ok)); err != nil {
			b.Fatal(err)
		}
		putTime += time.Since(start)
		if err := recv(b, errc, "WaitReady's return"); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/ready")
	b.ReportMetric(float64(putTime.Microseconds())/float64(b.N), "µs/put")
}

// revReportingStore records the revision of every batch of record changes
// once the gate's callback for it has returned, and then wakes kick.
type revReportingStore struct {
	versiongate.Store
	rev  atomic.Int64
	kick chan struct{}
}

func (s *revReportingStore) WatchRecords(ctx context.Context, rev int64, fn func([]versiongate.Record, int64)) error {
	return s.Store.WatchRecords(ctx, rev, func(changes []versiongate.Record, rev int64) {
		fn(changes, rev)
		s.rev.Store(rev)
		select {
		case s.kick <- struct{}{}:
		default:
		}
	})
}
