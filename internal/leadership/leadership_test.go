package leadership_test

import (
	"context"
	"testing"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/internal/leadership"
	"github.com/reconkit/reconkit/versiongate"
)

// election.Leadership and versiongate.Term are one type: each package
// spells the interface so that go doc shows its methods, and the
// assignments below compile only while the two spellings are identical.
// A leader function and a candidate written against one package serve the
// other as they are.
var (
	_ func(context.Context, election.Leadership) error = (func(context.Context, versiongate.Term) error)(nil)
	_ func(context.Context) (versiongate.Term, error)  = (func(context.Context) (election.Leadership, error))(nil)
	_ versiongate.Candidate                            = election.Elector(nil)
)

// Both packages' leadership-lost sentinels are the one value.
func TestOneLostSentinel(t *testing.T) {
	if election.ErrLeadershipLost != leadership.ErrLost || versiongate.ErrLeadershipLost != leadership.ErrLost {
		t.Fatal("election.ErrLeadershipLost, versiongate.ErrLeadershipLost and leadership.ErrLost differ")
	}
}
