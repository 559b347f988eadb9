package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/internal/event"
)

// Leader implements election.Elector: the candidate whose key under the prefix has
// the lowest create revision leads; its token is that revision.
func (e *Elector) Leader(ctx context.Context) (election.LeaderInfo, error) {
	resp, err := e.client.Get(ctx, e.keyPrefix, clientv3.WithFirstCreate()...)
	if err != nil {
		return election.LeaderInfo{}, fmt.Errorf("election: leader: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return election.LeaderInfo{}, election.ErrNoLeader
	}
	return leaderOf(resp.Kvs[0]), nil
}

func leaderOf(kv *mvccpb.KeyValue) election.LeaderInfo {
	return election.LeaderInfo{Identity: decodeIdentity(kv.Value), Token: election.Token(kv.CreateRevision)}
}

// Observe implements election.Elector. It lists the prefix, then watches it and
// reads the leader again after every change; when the watch fails it lists
// and watches again after a backoff. Observe's goroutines end when ctx
// ends or the elector closes.
func (e *Elector) Observe(ctx context.Context) <-chan election.LeaderInfo {
	ch := make(chan election.LeaderInfo)
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(e.ctx, cancel)
	var v event.Value[election.LeaderInfo]
	if !e.track(2) {
		cancel()
		stop()
		close(ch)
		return ch
	}
	go func() {
		defer e.wg.Done()
		defer cancel()
		defer stop()
		e.follow(ctx, &v)
	}()
	go func() {
		defer e.wg.Done()
		defer close(ch)
		forward(ctx, &v, ch)
	}()
	return ch
}

// follow keeps v set to the current leader until ctx ends.
func (e *Elector) follow(ctx context.Context, v *event.Value[election.LeaderInfo]) {
	for ctx.Err() == nil {
		_ = backoff.Retry(ctx, func(ctx context.Context) error {
			return e.followOnce(ctx, v)
		}, backoff.WithMaxInterval(maxRewatchInterval), backoff.WithClock(e.clock), backoff.WithName("election observe"), backoff.WithRand(e.rand))
	}
}

// followOnce lists and watches until the watch fails. It returns nil
// (starting the backoff anew) if the watch had been healthy for a while.
func (e *Elector) followOnce(ctx context.Context, v *event.Value[election.LeaderInfo]) error {
	read := func() (int64, error) {
		resp, err := e.client.Get(ctx, e.keyPrefix, clientv3.WithFirstCreate()...)
		if err != nil {
			return 0, err
		}
		info := election.LeaderInfo{}
		if len(resp.Kvs) > 0 {
			info = leaderOf(resp.Kvs[0])
		}
		if old, ok := v.Load(); !ok || old != info {
			v.Set(info)
		}
		return resp.Header.Revision, nil
	}
	rev, err := read()
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	start := e.clock.Now()
	failed := func(err error) error {
		if ctx.Err() != nil || e.clock.Since(start) >= 10*time.Second {
			return nil
		}
		return err
	}
	for wr := range e.client.Watch(wctx, e.keyPrefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithKeysOnly()) {
		if err := wr.Err(); err != nil {
			return failed(fmt.Errorf("watch: %w", err))
		}
		if len(wr.Events) == 0 {
			continue
		}
		if _, err := read(); err != nil {
			return failed(err)
		}
	}
	return failed(errors.New("watch ended"))
}

// forward sends v's states to ch, never blocking the writer of v and
// always delivering the newest state last. It skips a state equal to the
// one sent before.
func forward(ctx context.Context, v *event.Value[election.LeaderInfo], ch chan<- election.LeaderInfo) {
	w := v.Watch()
	defer w.Close()
	var last election.LeaderInfo
	sent := false
	for {
		info, err := w.Get(ctx)
		if err != nil {
			return
		}
		if sent && info == last {
			continue
		}
		select {
		case ch <- info:
			last, sent = info, true
		case <-ctx.Done():
			return
		}
	}
}
