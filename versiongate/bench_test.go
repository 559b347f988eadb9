package versiongate

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reconkit/reconkit/internal/event"
	"github.com/reconkit/reconkit/internal/testenv"
)

const benchNodes = 10000

// BenchmarkTrackerApply measures the releases watcher's in-memory work per
// event with 10,000 member nodes: decode a gate-owned record, update the
// counts, and publish a summary (one event per watch response, the worst
// case).
func BenchmarkTrackerApply(b *testing.B) {
	var out event.Value[Releases]
	tr := newTracker(Release{2, 0, 0}, Release{1, 1, 0}, publishedDecoder, &out)
	keys := make([]string, benchNodes)
	values := make([][][]byte, 3)
	for r := range values {
		values[r] = make([][]byte, benchNodes)
	}
	for i := range keys {
		id := "node-" + strconv.Itoa(i)
		keys[i] = id
		for r, v := range []Version{{Release: Release{1, 0, 0}}, {Release: Release{1, 1, 0}}, {Release: Release{2, 0, 0}}} {
			enc, err := EncodeNodeRelease(id, v)
			if err != nil {
				b.Fatal(err)
			}
			values[r][i] = enc
		}
		tr.update(logr.Discard(), keys[i], values[i%3][i])
	}
	tr.publish()
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		i := n % benchNodes
		tr.update(logr.Discard(), keys[i], values[(n/benchNodes+i+1)%3][i])
		tr.rev++
		tr.publish()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

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
		enc, err := EncodeNodeRelease("x", Version{Release: Release{1, uint64(r), 0}})
		if err != nil {
			b.Fatal(err)
		}
		vals[r] = string(enc)
	}
	// The decoder below ignores the ID, so one encoding per release does.
	decode := func(_ string, value []byte) (Release, bool, error) {
		_, v, err := DecodeNodeRelease(value)
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

	var out event.Value[Releases]
	tr := newTracker(Release{1, 2, 0}, Release{1, 0, 0}, decode, &out)
	st := etcdStore(b, cli)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = tr.run(rctx, st, nil) }()
	defer func() { cancel(); <-done }()
	w := out.Watch()
	defer w.Close()
	for {
		r, err := w.Get(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if r.Nodes == benchNodes {
			break
		}
	}

	b.ReportAllocs()
	b.ResetTimer()
	last := write(0, b.N, 1)
	for {
		r, err := w.Get(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if r.Revision >= last {
			break
		}
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
	g, err := New(Config{Client: cli, NodeID: "n1", Version: Version{Release: Release{1, 0, 0}},
		StatusKey: testStatusKey, NodesPrefix: testNodesPrefix, Decode: decodeRegistry})
	if err != nil {
		b.Fatal(err)
	}
	tooNew, _ := Status{State: StateDone, Version: Version{Release: Release{2, 0, 0}}, MinimumCompatibleRelease: Release{2, 0, 0}}.Encode()
	ok, _ := Status{State: StateDone, Version: Version{Release: Release{1, 0, 0}}, MinimumCompatibleRelease: Release{1, 0, 0}}.Encode()

	var total, putTime time.Duration
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		if _, err := cli.Put(ctx, testStatusKey, string(tooNew)); err != nil {
			b.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- g.WaitReady(ctx) }()
		<-blocked
		b.StartTimer()
		start := time.Now()
		if _, err := cli.Put(ctx, testStatusKey, string(ok)); err != nil {
			b.Fatal(err)
		}
		putTime += time.Since(start)
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/ready")
	b.ReportMetric(float64(putTime.Microseconds())/float64(b.N), "µs/put")
}
