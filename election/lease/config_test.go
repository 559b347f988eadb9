package lease

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/kubefake"
)

// Every configuration New refuses is refused with an error wrapping
// election.ErrInvalidConfig, as election's doc promises of every backend.
func TestNewWrapsErrInvalidConfig(t *testing.T) {
	cs := kubefake.NewClientset()
	ok := func() Config { return Config{Client: cs, Namespace: "ns", Name: "lease", Identity: "a"} }
	for name, mutate := range map[string]func(*Config){
		"no client":          func(c *Config) { c.Client = nil },
		"no namespace":       func(c *Config) { c.Namespace = "" },
		"bad namespace":      func(c *Config) { c.Namespace = "Not_A_Label" },
		"bad name":           func(c *Config) { c.Name = "Not_A_Name" },
		"fractional lease":   func(c *Config) { c.LeaseDuration = 1500 * time.Millisecond },
		"deadline too long":  func(c *Config) { c.LeaseDuration, c.RenewDeadline = 10*time.Second, 10*time.Second },
		"negative takeover":  func(c *Config) { c.TakeoverMargin = -time.Second },
		"coordinated no ver": func(c *Config) { c.Coordinated = &Coordinated{} },
		"coordinated bad id": func(c *Config) { c.Coordinated = &Coordinated{BinaryVersion: "1.0.0"}; c.Identity = "Not A Name" },
	} {
		c := ok()
		mutate(&c)
		_, err := New(c)
		require.ErrorIs(t, err, election.ErrInvalidConfig, name)
	}
	_, err := New(ok())
	require.NoError(t, err)
}
