package etcdlease_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/reconkit/reconkit/internal/etcdlease"
)

// grants answers every keep-alive with a TTL: 7 s for lease 1, none (the
// lease is gone) for any other.
type grants struct{ pb.UnimplementedLeaseServer }

func (grants) LeaseKeepAlive(stream pb.Lease_LeaseKeepAliveServer) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		ttl := int64(0)
		if req.ID == 1 {
			ttl = 7
		}
		if err := stream.Send(&pb.LeaseKeepAliveResponse{ID: req.ID, TTL: ttl}); err != nil {
			return nil
		}
	}
}

// A renewal is one request; its caller decides when to send another.
func ExampleKeepAliveOnce() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := grpc.NewServer()
	pb.RegisterLeaseServer(srv, grants{})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	defer func() { srv.Stop(); <-served }()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + lis.Addr().String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = cli.Close() }()

	ctx := context.Background()
	ttl, err := etcdlease.KeepAliveOnce(ctx, cli, 1)
	fmt.Println(ttl, err)
	_, err = etcdlease.KeepAliveOnce(ctx, cli, 2)
	fmt.Println(errors.Is(err, rpctypes.ErrLeaseNotFound))
	// Output:
	// 7s <nil>
	// true
}
