package versiongate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/internal/event"
)

// listPageSize bounds one range read of the initial listing, so a large
// cluster never exceeds etcd's request size limit.
const listPageSize = 1000

// Releases summarises the releases of the member nodes at one etcd
// revision. Min and Max include the local node's release, so they are
// defined even when no record exists.
type Releases struct {
	Min, Max Release
	// Revision is the etcd revision at which the summary is complete: the
	// watcher has applied every change of the nodes prefix up to and
	// including it.
	Revision int64
	// Nodes is the number of member records counted.
	Nodes int
}

// tracker keeps per-release counts of the member nodes under a prefix and
// publishes a Releases summary after each batch of changes. Its maps are
// owned by the watcher goroutine; blocking is shared under mu.
type tracker struct {
	prefix    string
	local     Release
	minCompat Release
	decode    DecodeFunc
	out       *event.Value[Releases]

	rev    int64
	nodes  map[string]Release // key -> release, members only
	counts map[Release]int

	mu       sync.Mutex
	blocking map[string]Release // node ID -> release below minCompat
}

func newTracker(prefix string, local, minCompat Release, decode DecodeFunc, out *event.Value[Releases]) *tracker {
	t := &tracker{prefix: prefix, local: local, minCompat: minCompat, decode: decode, out: out}
	t.reset()
	return t
}

func (t *tracker) reset() {
	t.rev = 0
	t.nodes = make(map[string]Release)
	t.counts = make(map[Release]int)
	t.mu.Lock()
	t.blocking = make(map[string]Release)
	t.mu.Unlock()
}

// update applies one record: its current value, or a deletion when value
// is empty.
func (t *tracker) update(log logr.Logger, key, value []byte) {
	if prev, ok := t.nodes[string(key)]; ok {
		delete(t.nodes, string(key))
		if t.counts[prev]--; t.counts[prev] == 0 {
			delete(t.counts, prev)
		}
		if prev.Less(t.minCompat) {
			t.mu.Lock()
			delete(t.blocking, string(key[len(t.prefix):]))
			t.mu.Unlock()
		}
	}
	if len(value) == 0 {
		return
	}
	k := string(key)
	rel, member, err := t.decode(k, value)
	if err != nil {
		log.Error(err, "Skipping node record that does not decode", "key", k)
		return
	}
	if !member {
		return
	}
	t.nodes[k] = rel
	t.counts[rel]++
	if rel.Less(t.minCompat) {
		t.mu.Lock()
		t.blocking[k[len(t.prefix):]] = rel
		t.mu.Unlock()
	}
}

func (t *tracker) publish() {
	r := Releases{Min: t.local, Max: t.local, Revision: t.rev, Nodes: len(t.nodes)}
	for rel := range t.counts {
		r.Min = minRelease(r.Min, rel)
		r.Max = maxRelease(r.Max, rel)
	}
	t.out.Set(r)
}

// Blocking returns the member nodes whose release is below the minimum
// compatible release, sorted by ID.
func (t *tracker) blockingNodes() []Node {
	t.mu.Lock()
	out := make([]Node, 0, len(t.blocking))
	for id, rel := range t.blocking {
		out = append(out, Node{ID: id, Release: rel})
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b Node) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return out
}

// run lists the prefix, then watches it from the next revision, publishing
// after every batch. When the watch fails (compaction, a lost leader, a
// closed channel) it lists again instead of giving up. It returns only when
// ctx ends.
func (t *tracker) run(ctx context.Context, cli *clientv3.Client, clk clock.Clock) error {
	log := logr.FromContextOrDiscard(ctx)
	for {
		err := backoff.Retry(ctx, func(ctx context.Context) error { return t.list(ctx, cli) },
			backoff.WithClock(clk), backoff.WithName("versiongate: list nodes"))
		if err != nil {
			return err
		}
		t.publish()
		err = t.watch(ctx, log, cli)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.Info("Node watch ended, listing nodes again", "reason", err.Error(), "revision", t.rev)
	}
}

// list reads every record under the prefix at one revision, in pages.
func (t *tracker) list(ctx context.Context, cli *clientv3.Client) error {
	log := logr.FromContextOrDiscard(ctx)
	t.reset()
	end := clientv3.GetPrefixRangeEnd(t.prefix)
	key := t.prefix
	var rev int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(listPageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := cli.Get(ctx, key, opts...)
		if err != nil {
			return fmt.Errorf("list nodes under %q: %w", t.prefix, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			t.update(log, kv.Key, kv.Value)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	t.rev = rev
	return nil
}

// errWatchClosed is the reason given when the watch channel closes while
// the context is still alive.
var errWatchClosed = errors.New("watch channel closed")

func (t *tracker) watch(ctx context.Context, log logr.Logger, cli *clientv3.Client) error {
	// Without a leader a member serves a watch that silently stops; require
	// one so the watch fails and is re-established elsewhere.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := cli.Watch(wctx, t.prefix, clientv3.WithPrefix(), clientv3.WithRev(t.rev+1))
	for resp := range wch {
		if err := resp.Err(); err != nil {
			return err
		}
		if resp.Canceled {
			return errors.New("watch canceled by the server")
		}
		if len(resp.Events) == 0 {
			continue
		}
		for _, ev := range resp.Events {
			if ev.Type == mvccpb.DELETE {
				t.update(log, ev.Kv.Key, nil)
			} else {
				t.update(log, ev.Kv.Key, ev.Kv.Value)
			}
			// The response header's revision can run ahead of the events
			// delivered so far when the server splits a long backlog;
			// only the events' own revisions are known to be complete.
			t.rev = max(t.rev, ev.Kv.ModRevision)
		}
		t.publish()
	}
	return errWatchClosed
}
