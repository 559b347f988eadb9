package main

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/reconkit/reconkit/cmd/bench/internal/benchutil"
	"github.com/reconkit/reconkit/election/etcd"
	"github.com/reconkit/reconkit/internal/servers"
)

// etcdClient connects to addr; if c is not nil it counts every unary call
// and every message sent on a stream (a keepalive, a watch request).
func etcdClient(addr string, c *counter) (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: []string{addr}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()}
	if c != nil {
		cfg.DialOptions = benchutil.CountGRPC(&c.n)
	}
	return clientv3.New(cfg)
}

func (b *bench) etcdAddr() string { return b.a.Etcd.Members[0].ClientAddr() }

func (b *bench) oursEtcd(cli *clientv3.Client, prefix, id string) (*etcd.Elector, error) {
	return etcd.New(etcd.Config{Client: cli, Prefix: prefix, Identity: id, SessionTTL: *ttl})
}

// holder is one candidate of either etcd implementation.
type holder interface {
	// campaign blocks until the candidate leads and returns a channel
	// closed when the holder itself learns that its term ended, and a
	// resign function.
	campaign(ctx context.Context) (ended <-chan struct{}, resign func(context.Context) error, err error)
	close()
}

type oursHolder struct{ e *etcd.Elector }

func (h oursHolder) campaign(ctx context.Context) (<-chan struct{}, func(context.Context) error, error) {
	l, err := h.e.Campaign(ctx)
	if err != nil {
		return nil, nil, err
	}
	return l.Context().Done(), l.Resign, nil
}

func (h oursHolder) close() { _ = h.e.Close() }

// concHolder is etcd's concurrency.Election on a session of its own per
// term, as a program that creates its session at start-up does after a
// restart.
type concHolder struct {
	cli    *clientv3.Client
	prefix string
	id     string
}

func (h concHolder) campaign(ctx context.Context) (<-chan struct{}, func(context.Context) error, error) {
	s, err := concurrency.NewSession(h.cli, concurrency.WithTTL(int(*ttl/time.Second)))
	if err != nil {
		return nil, nil, err
	}
	e := concurrency.NewElection(s, h.prefix)
	if err := e.Campaign(ctx, h.id); err != nil {
		_ = s.Close()
		return nil, nil, err
	}
	return s.Done(), func(ctx context.Context) error {
		err := e.Resign(ctx)
		_ = s.Close()
		return err
	}, nil
}

func (h concHolder) close() {}

type etcdKind struct {
	name string
	make func(cli *clientv3.Client, prefix, id string) (holder, error)
}

func (b *bench) etcdKinds() []etcdKind {
	return []etcdKind{
		{"ours", func(cli *clientv3.Client, prefix, id string) (holder, error) {
			e, err := b.oursEtcd(cli, prefix, id)
			return oursHolder{e}, err
		}},
		{"concurrency", func(cli *clientv3.Client, prefix, id string) (holder, error) {
			return concHolder{cli: cli, prefix: prefix, id: id}, nil
		}},
	}
}

type etcdWon struct {
	ended  <-chan struct{}
	resign func(context.Context) error
	at     time.Time
	err    error
}

func etcdCampaign(ctx context.Context, h holder) <-chan etcdWon {
	ch := make(chan etcdWon, 1)
	go func() {
		ended, resign, err := h.campaign(ctx)
		ch <- etcdWon{ended, resign, time.Now(), err}
	}()
	return ch
}

// etcdHandover measures Resign → the successor's Campaign returns.
func (b *bench) etcdHandover(ctx context.Context, k etcdKind) ([]time.Duration, error) {
	cli, err := etcdClient(b.etcdAddr(), nil)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	prefix := "/bench/" + b.leaseName("handover-"+k.name)
	var cands [2]holder
	for i := range cands {
		if cands[i], err = k.make(cli, prefix, fmt.Sprintf("%s-%d", k.name, i)); err != nil {
			return nil, err
		}
		defer cands[i].close()
	}
	cur := <-etcdCampaign(ctx, cands[0])
	if cur.err != nil {
		return nil, cur.err
	}
	waiting := etcdCampaign(ctx, cands[1])
	var ds []time.Duration
	for i := range *handovers {
		if err := pause(ctx); err != nil {
			return nil, err
		}
		t0 := time.Now()
		if err := cur.resign(ctx); err != nil {
			return nil, err
		}
		next := <-waiting
		if next.err != nil {
			return nil, next.err
		}
		ds = append(ds, next.at.Sub(t0))
		cur, waiting = next, etcdCampaign(ctx, cands[i%2])
	}
	if err := cur.resign(ctx); err != nil {
		return nil, err
	}
	if next := <-waiting; next.err == nil {
		return ds, next.resign(ctx)
	}
	return ds, nil
}

// etcdCutOff runs rounds in which a leader behind a proxy is cut off while
// a follower waits; it measures cut → the follower leads (crash failover)
// and cut → the cut-off leader's own term signal ends (detection).
func (b *bench) etcdCutOff(ctx context.Context, k etcdKind, rounds int) (failover, detect []time.Duration, err error) {
	direct, err := etcdClient(b.etcdAddr(), nil)
	if err != nil {
		return nil, nil, err
	}
	defer direct.Close()
	prefix := "/bench/" + b.leaseName("cut-"+k.name)
	for i := range rounds {
		f, d, err := b.etcdCutOnce(ctx, k, direct, prefix, i)
		if err != nil {
			return nil, nil, err
		}
		failover, detect = append(failover, f), append(detect, d)
	}
	return failover, detect, nil
}

func (b *bench) etcdCutOnce(ctx context.Context, k etcdKind, direct *clientv3.Client, prefix string, i int) (time.Duration, time.Duration, error) {
	p, err := servers.StartProxy(b.etcdAddr())
	if err != nil {
		return 0, 0, err
	}
	defer p.Close()
	cutCli, err := etcdClient(p.Addr(), nil)
	if err != nil {
		return 0, 0, err
	}
	defer cutCli.Close()
	leader, err := k.make(cutCli, prefix, fmt.Sprintf("%s-leader-%d", k.name, i))
	if err != nil {
		return 0, 0, err
	}
	defer leader.close()
	follower, err := k.make(direct, prefix, fmt.Sprintf("%s-follower-%d", k.name, i))
	if err != nil {
		return 0, 0, err
	}
	defer follower.close()
	first := <-etcdCampaign(ctx, leader)
	if first.err != nil {
		return 0, 0, first.err
	}
	waiting := etcdCampaign(ctx, follower)
	if err := pause(ctx); err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	p.Cut()
	var detected, won time.Time
	var next etcdWon
	for detected.IsZero() || won.IsZero() {
		select {
		case <-first.ended:
			detected, first.ended = time.Now(), nil
		case next = <-waiting:
			if next.err != nil {
				return 0, 0, next.err
			}
			won, waiting = next.at, nil
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
	}
	p.Restore()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_ = first.resign(rctx)
	cancel()
	return won.Sub(t0), detected.Sub(t0), next.resign(ctx)
}

// etcdIdle counts the requests a follower sends while the leader holds.
func (b *bench) etcdIdle(ctx context.Context, k etcdKind) (float64, error) {
	direct, err := etcdClient(b.etcdAddr(), nil)
	if err != nil {
		return 0, err
	}
	defer direct.Close()
	var c counter
	counted, err := etcdClient(b.etcdAddr(), &c)
	if err != nil {
		return 0, err
	}
	defer counted.Close()
	prefix := "/bench/" + b.leaseName("idle-"+k.name)
	leader, err := k.make(direct, prefix, k.name+"-leader")
	if err != nil {
		return 0, err
	}
	defer leader.close()
	follower, err := k.make(counted, prefix, k.name+"-follower")
	if err != nil {
		return 0, err
	}
	defer follower.close()
	first := <-etcdCampaign(ctx, leader)
	if first.err != nil {
		return 0, first.err
	}
	fctx, fcancel := context.WithCancel(ctx)
	waiting := etcdCampaign(fctx, follower)
	n, err := c.countIdle(ctx)
	fcancel()
	if err != nil {
		return 0, err
	}
	if w := <-waiting; w.err == nil {
		_ = w.resign(ctx)
	}
	return float64(n) / idle.Seconds(), first.resign(ctx)
}
