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

// balancer is an object a host keeps across terms, as a
// cloud-controller-manager keeps its load balancer implementation: the
// controller calls it from its own loop, not from a lead function, so it
// asks the elector for the current term at each call.
type balancer struct {
	terms election.TermHolder
}

func (b *balancer) ensure(name string) error {
	l, ok := b.terms.Current()
	if !ok {
		return fmt.Errorf("ensure %s: %w", name, election.ErrNotLeader)
	}
	// Act under the term's context; fence the write with its token.
	fmt.Printf("ensure %s under term %d of %s\n", name, l.Token(), l.Identity())
	return l.Context().Err()
}

// A host that keeps an object across terms gives it the elector as an
// election.TermHolder: at each call the object takes the current term's
// context and token, and refuses to act between terms.
func ExampleTermHolder() {
	e := electiontest.NewElection()
	candidate := e.NewCandidate("ccm-a")
	b := &balancer{terms: candidate}
	ctx := context.Background()

	fmt.Println(b.ensure("svc-1"))
	l, err := candidate.Campaign(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(b.ensure("svc-1"))
	_ = l.Resign(ctx)
	l, _ = candidate.Campaign(ctx)
	fmt.Println(b.ensure("svc-2"))
	_ = l.Resign(ctx)
	// Output:
	// ensure svc-1: election: not leader
	// ensure svc-1 under term 1 of ccm-a
	// <nil>
	// ensure svc-2 under term 2 of ccm-a
	// <nil>
}
