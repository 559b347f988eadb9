package versiongate

import (
	"strconv"
	"testing"

	"github.com/go-logr/logr"

	"github.com/reconkit/reconkit/internal/event"
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
		tr.update(logr.Discard(), Record{ID: keys[i], Value: values[i%3][i]})
	}
	tr.publish()
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		i := n % benchNodes
		tr.update(logr.Discard(), Record{ID: keys[i], Value: values[(n/benchNodes+i+1)%3][i]})
		tr.rev++
		tr.publish()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
