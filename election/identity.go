package election

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
)

// DefaultIdentity returns a candidate identity made of the host name and a
// random suffix, such as "node-3_5f1c9a0e2b7d4c81". Backends use it when a
// configuration leaves the identity empty.
//
// The suffix (64 random bits) makes two processes on one host, or a process
// and its restarted successor, distinct candidates: a restarted process must
// never believe it still holds its predecessor's term. Both backends keep
// that rule for an identity that is reused too (a pod name): a candidate
// that finds the election held under its own identity treats that term
// as anybody else's (an etcd term is its lease; a Lease term of its own
// identity is taken only once expired, Coordinated or not). When the host
// name cannot be read, "candidate" stands in for it.
func DefaultIdentity() string {
	host, err := os.Hostname()
	host = strings.TrimSpace(host)
	if err != nil || host == "" {
		host = "candidate"
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	return host + "_" + hex.EncodeToString(b[:])
}
