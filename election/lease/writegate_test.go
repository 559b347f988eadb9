package lease

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/election"
)

// judgedTerm is a live term with a ValidUntil far ahead whose own
// judgement (ValidNow, on its elector's clock) may say otherwise, as an
// etcd term's does when its elector's fake clock passed ValidUntil.
type judgedTerm struct{ valid bool }

func (judgedTerm) Context() context.Context     { return context.Background() }
func (judgedTerm) Token() election.Token        { return 3 }
func (judgedTerm) Identity() string             { return "a" }
func (judgedTerm) Resign(context.Context) error { return nil }
func (judgedTerm) ValidUntil() time.Time        { return time.Now().Add(time.Hour) }
func (j judgedTerm) ValidNow() bool             { return j.valid }

type okTransport struct{ sent int }

func (o *okTransport) RoundTrip(*http.Request) (*http.Response, error) {
	o.sent++
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
}

// TestWriteGateAsksTheTermsOwnJudgement checks that the gate defers to a
// term that judges its validity on its own elector's clock (an etcd term,
// through internal/term.Validator), not only to its context and
// ValidUntil on the real clock, and that reads always pass.
func TestWriteGateAsksTheTermsOwnJudgement(t *testing.T) {
	for _, valid := range []bool{true, false} {
		next := &okTransport{}
		g := &writeGate{next: next, l: judgedTerm{valid: valid}}
		req, err := http.NewRequest(http.MethodPut, "http://apiserver/api/v1/namespaces/ns/configmaps/x", http.NoBody)
		require.NoError(t, err)
		resp, err := g.RoundTrip(req)
		if valid {
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			require.Equal(t, 1, next.sent)
		} else {
			require.True(t, errors.Is(err, election.ErrNotLeader), "write of a term that judges itself invalid: %v", err)
			require.Zero(t, next.sent, "a refused write reached the transport")
		}
		get, err := http.NewRequest(http.MethodGet, "http://apiserver/api/v1/namespaces/ns/configmaps/x", http.NoBody)
		require.NoError(t, err)
		resp, err = g.RoundTrip(get)
		require.NoError(t, err, "reads always pass")
		require.NoError(t, resp.Body.Close())
	}
}

// foreignTerm is a term of neither backend (the in-memory fake's, say): it
// has a context and maybe a ValidUntil, but no judgement of its own.
type foreignTerm struct {
	ctx        context.Context
	validUntil time.Time // zero: the term does not expire
}

func (f foreignTerm) Context() context.Context   { return f.ctx }
func (foreignTerm) Token() election.Token        { return 3 }
func (foreignTerm) Identity() string             { return "a" }
func (foreignTerm) Resign(context.Context) error { return nil }

type expiringForeignTerm struct{ foreignTerm }

func (f expiringForeignTerm) ValidUntil() time.Time { return f.validUntil }

// TestWriteGateJudgesOtherTermsByContextAndValidUntil: for a term of
// neither backend, a write passes only while the term's context is live
// and, if it expires, the real clock is before its ValidUntil.
func TestWriteGateJudgesOtherTermsByContextAndValidUntil(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	live := context.Background()
	for _, c := range []struct {
		name  string
		l     election.Leadership
		valid bool
	}{
		{"live", foreignTerm{ctx: live}, true},
		{"ended", foreignTerm{ctx: ended}, false},
		{"live, before ValidUntil", expiringForeignTerm{foreignTerm{ctx: live, validUntil: time.Now().Add(time.Hour)}}, true},
		{"live, past ValidUntil", expiringForeignTerm{foreignTerm{ctx: live, validUntil: time.Now().Add(-time.Millisecond)}}, false},
		{"ended, before ValidUntil", expiringForeignTerm{foreignTerm{ctx: ended, validUntil: time.Now().Add(time.Hour)}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			next := &okTransport{}
			g := &writeGate{next: next, l: c.l}
			req, err := http.NewRequest(http.MethodPatch, "http://apiserver/api/v1/namespaces/ns/configmaps/x", http.NoBody)
			require.NoError(t, err)
			resp, err := g.RoundTrip(req)
			if c.valid {
				require.NoError(t, err)
				require.NoError(t, resp.Body.Close())
				require.Equal(t, 1, next.sent)
				return
			}
			require.True(t, errors.Is(err, election.ErrNotLeader), "write of an invalid term: %v", err)
			require.Zero(t, next.sent, "a refused write reached the transport")
		})
	}
}
