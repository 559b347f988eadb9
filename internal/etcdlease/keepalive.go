package etcdlease

import (
	"context"
	"errors"
	"io"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNoConnection is returned by KeepAliveOnce when the client has no
// connection to send on.
var ErrNoConnection = errors.New("etcdlease: the etcd client has no connection")

// KeepAliveOnce renews lease with exactly one keep-alive request on one
// stream, and returns the TTL the server granted. A lease the server no
// longer has (it answers a TTL of zero or less) is
// rpctypes.ErrLeaseNotFound; any other failure (the stream could not be
// opened, the send or the answer failed) is returned as it is, after
// clientv3.ContextError, and nothing is sent again: retrying is the
// caller's decision. The request goes over the client's connection, with
// its credentials and interceptors, and fails fast when the connection is
// down rather than waiting for it. The stream is closed before it
// returns.
func KeepAliveOnce(ctx context.Context, cli *clientv3.Client, lease clientv3.LeaseID) (time.Duration, error) {
	conn := cli.ActiveConnection()
	if conn == nil {
		return 0, ErrNoConnection
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := pb.NewLeaseClient(conn).LeaseKeepAlive(sctx)
	if err != nil {
		return 0, clientv3.ContextError(ctx, err)
	}
	// A Send that fails with io.EOF means the server ended the stream;
	// gRPC gives the server's answer to the Recv that follows, so the
	// error is taken from there.
	if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(lease)}); err != nil && !errors.Is(err, io.EOF) {
		return 0, clientv3.ContextError(ctx, err)
	}
	resp, err := stream.Recv()
	if err != nil {
		return 0, clientv3.ContextError(ctx, err)
	}
	_ = stream.CloseSend()
	if resp.TTL <= 0 {
		return 0, rpctypes.ErrLeaseNotFound
	}
	return time.Duration(resp.TTL) * time.Second, nil
}
