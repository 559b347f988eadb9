package electiontest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/election"
)

// judgedTerm is a term as its holder sees it: a context and, if expires,
// a ValidUntil.
type judgedTerm struct {
	ctx        context.Context
	token      election.Token
	validUntil time.Time
}

func (j *judgedTerm) Context() context.Context     { return j.ctx }
func (j *judgedTerm) Token() election.Token        { return j.token }
func (j *judgedTerm) Identity() string             { return "holder" }
func (j *judgedTerm) Resign(context.Context) error { return nil }
func (j *judgedTerm) ValidUntil() time.Time        { return j.validUntil }

// plainTerm is a term without a ValidUntil.
type plainTerm struct {
	ctx   context.Context
	token election.Token
}

func (p *plainTerm) Context() context.Context     { return p.ctx }
func (p *plainTerm) Token() election.Token        { return p.token }
func (p *plainTerm) Identity() string             { return "holder" }
func (p *plainTerm) Resign(context.Context) error { return nil }

// The suite judges overlap from each holder's own view at the instant a
// successor's Campaign returns: a term whose context is live and, if it
// expires, whose ValidUntil has not passed is still valid; one whose
// context ended, or whose ValidUntil passed, is not. Tokens must rise.
func TestJudgeUsesTheHoldersView(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	now := time.Now()
	for _, c := range []struct {
		name    string
		earlier election.Leadership
		later   election.Token
		overlap bool
	}{
		{"context live, before ValidUntil", &judgedTerm{ctx: live, token: 1, validUntil: now.Add(time.Hour)}, 2, true},
		{"context live, past ValidUntil", &judgedTerm{ctx: live, token: 1, validUntil: now.Add(-time.Millisecond)}, 2, false},
		{"context ended, before ValidUntil", &judgedTerm{ctx: ended, token: 1, validUntil: now.Add(time.Hour)}, 2, false},
		{"no ValidUntil, context live", &plainTerm{ctx: live, token: 1}, 2, true},
		{"no ValidUntil, context ended", &plainTerm{ctx: ended, token: 1}, 2, false},
		{"token not above", &judgedTerm{ctx: ended, token: 2}, 2, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var j judge
			j.began(c.earlier)
			j.began(&judgedTerm{ctx: live, token: c.later, validUntil: now.Add(time.Hour)})
			require.Equal(t, c.overlap, len(j.violations) > 0, "violations: %v", j.violations)
		})
	}
	// A term ended by KillSession is exempt.
	var j judge
	killed := &judgedTerm{ctx: live, token: 1, validUntil: now.Add(time.Hour)}
	j.began(killed)
	j.exclude(killed)
	j.began(&judgedTerm{ctx: live, token: 2, validUntil: now.Add(time.Hour)})
	require.Empty(t, j.violations)
}
