package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/etcd"
)

// New validates the configuration and fills its defaults; it sends no
// request, so this runs without an etcd server. A host then campaigns with
// election.Run (see the package election example) or Campaign, and shuts
// the elector down with Close.
func ExampleNew() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}, DialTimeout: time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cli.Close()

	e, err := etcd.New(etcd.Config{Client: cli, Prefix: "/my-controller/leader", Identity: "node-a"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()
	fmt.Println(e.Identity(), "leading:", e.Leading())

	_, err = etcd.New(etcd.Config{Client: cli, Prefix: "/my-controller/leader", SessionTTL: 500 * time.Millisecond})
	fmt.Println(errors.Is(err, election.ErrInvalidConfig))
	// Output:
	// node-a leading: false
	// true
}

// A leader's writes to etcd carry its term's guard, so etcd itself refuses
// them once the term has ended, whatever the leader's process believes.
// (Not run: it needs an etcd server.)
func ExampleLeadership_GuardedTxn() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}, DialTimeout: time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cli.Close()
	e, err := etcd.New(etcd.Config{Client: cli, Prefix: "/my-controller/leader"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = election.Run(ctx, e, func(ctx context.Context, l election.Leadership) error {
		term := l.(*etcd.Leadership)
		_, err := term.GuardedTxn(ctx, nil, []clientv3.Op{clientv3.OpPut("/my-controller/config", "v2")}, nil)
		if errors.Is(err, election.ErrNotLeader) {
			return nil // the term ended; Run campaigns again
		}
		return err
	})
	if err != nil {
		fmt.Println(err)
	}
}
