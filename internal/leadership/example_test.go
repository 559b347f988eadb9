package leadership_test

import (
	"errors"
	"fmt"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/internal/leadership"
	"github.com/reconkit/reconkit/versiongate"
)

// One sentinel, whichever package a host branches with.
func Example() {
	err := fmt.Errorf("writing the status: %w", leadership.ErrLost)
	fmt.Println(errors.Is(err, election.ErrLeadershipLost), errors.Is(err, versiongate.ErrLeadershipLost))
	// Output: true true
}
