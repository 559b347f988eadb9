package election_test

import (
	"context"
	"fmt"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/electiontest"
)

// Run calls lead for every term it wins. Here the term is lost once (the
// in-memory election deposes the leader), Run campaigns again, and the
// second term ends when Run's context is cancelled.
func ExampleRun() {
	e := electiontest.NewElection()
	candidate := e.NewCandidate("node-a")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	err := election.Run(ctx, candidate, func(ctx context.Context, l election.Leadership) error {
		fmt.Printf("%s leads term %d\n", l.Identity(), l.Token())
		if l.Token() == 1 {
			e.Depose()
		} else {
			cancel()
		}
		<-ctx.Done()
		fmt.Printf("term %d ended: %v\n", l.Token(), context.Cause(ctx))
		return nil
	})
	fmt.Println("Run:", err)
	fmt.Println("nobody leads:", e.Leader().IsZero())
	// Output:
	// node-a leads term 1
	// term 1 ended: election: leadership lost: deposed by the test
	// node-a leads term 2
	// term 2 ended: context canceled
	// Run: <nil>
	// nobody leads: true
}
