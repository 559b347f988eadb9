package term_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/internal/term"
)

// A term ends once: Resign ends its context with election.ErrResigned and
// runs the release hook, and a loss after it changes nothing.
func Example() {
	var leading term.Flag
	core := term.New(context.Background(), "node-a", 7, func(context.Context) error {
		fmt.Println("released")
		return nil
	})
	leading.Follow(core.Context())
	changed := leading.Changed()

	fmt.Println(core.Identity(), core.Token(), core.Ended())
	if err := core.Resign(context.Background()); err != nil {
		fmt.Println(err)
	}
	<-changed // the flag went down with the term
	fmt.Println(errors.Is(context.Cause(core.Context()), election.ErrResigned))
	fmt.Println(core.Lose(errors.New("lease expired")))
	// Output:
	// node-a 7 false
	// released
	// true
	// false
}
