package versiongate

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func rel(t testing.TB, s string) Release {
	t.Helper()
	r, err := ParseRelease(s)
	require.NoError(t, err)
	return r
}

func ver(t testing.TB, s string) Version {
	t.Helper()
	v, err := ParseVersion(s)
	require.NoError(t, err)
	return v
}

// registryRecord is a host-owned node record: nodes in a registry of which
// only some roles count.
type registryRecord struct {
	Roles   []string `json:"roles"`
	Release string   `json:"release,omitempty"`
}

func decodeRegistry(_ string, value []byte) (Release, bool, error) {
	var r registryRecord
	if err := json.Unmarshal(value, &r); err != nil {
		return Release{}, false, err
	}
	controller := false
	for _, role := range r.Roles {
		controller = controller || role == "controller"
	}
	if !controller || r.Release == "" {
		return Release{}, false, nil
	}
	rel, err := ParseRelease(r.Release)
	return rel, err == nil, err
}
