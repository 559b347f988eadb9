package electiontest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/electiontest"
)

// A test drives the in-memory election: in Manual mode nobody wins until
// the test elects a campaigning candidate.
func ExampleElection() {
	e := electiontest.NewElection(electiontest.Manual())
	a, b := e.NewCandidate("a"), e.NewCandidate("b")
	ctx := context.Background()

	won := make(chan election.Leadership, 2)
	for _, c := range []*electiontest.Candidate{a, b} {
		go func() {
			if l, err := c.Campaign(ctx); err == nil {
				won <- l
			}
		}()
	}
	_ = e.AwaitWaiting(ctx, 2)

	_ = e.Elect(b)
	lb := <-won
	fmt.Println(lb.Identity(), "leads term", lb.Token())

	_ = e.Elect(a) // deposes b
	la := <-won
	fmt.Println("b's term:", context.Cause(lb.Context()))
	fmt.Println(la.Identity(), "leads term", la.Token())

	a.Partition()
	fmt.Println("a's term:", context.Cause(la.Context()))
	fmt.Println("nobody leads:", e.Leader().IsZero())
	// Output:
	// b leads term 1
	// b's term: election: leadership lost: deposed by the test
	// a leads term 2
	// a's term: election: leadership lost: partitioned
	// nobody leads: true
}

// A test waits for leadership on a deadline instead of polling: here a
// host's loop under election.Run on the fake, then a partition that ends
// its term.
func ExampleWaitLeading() {
	e := electiontest.NewElection()
	a := e.NewCandidate("a")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- election.Run(runCtx, a, func(ctx context.Context, l election.Leadership) error {
			<-ctx.Done()
			return nil
		})
	}()
	fmt.Println("wait leading:", electiontest.WaitLeading(ctx, a), a.Leading())
	a.Partition()
	fmt.Println("wait not leading:", electiontest.WaitNotLeading(ctx, a), a.Leading())
	a.Heal()
	fmt.Println("leader:", func() string { i, _ := electiontest.WaitLeader(ctx, a, "a"); return i.Identity }())
	stop()
	fmt.Println("Run:", <-done)
	// Output:
	// wait leading: <nil> true
	// wait not leading: <nil> false
	// leader: a
	// Run: <nil>
}
