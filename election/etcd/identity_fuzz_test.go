package etcd

import (
	"strings"
	"testing"

	"github.com/reconkit/reconkit/election"
)

// FuzzDecodeIdentity feeds arbitrary leader-key values, as any process
// with write access to the prefix could leave them, to decodeIdentity.
func FuzzDecodeIdentity(f *testing.F) {
	for _, s := range []string{"node-1_5f1c9a0e2b7d4c81", "", "invalid:x", "a\nb", "\xff\xfe", "ünïcode", strings.Repeat("x", 2000)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id := decodeIdentity(b)
		if id == "" {
			t.Fatalf("decodeIdentity(%q) is empty, which means no leader", b)
		}
		if validateIdentity(string(b)) == nil {
			if id != string(b) {
				t.Fatalf("valid identity %q decoded as %q", b, id)
			}
			return
		}
		if !strings.HasPrefix(id, "invalid:") {
			t.Fatalf("invalid value %q decoded as %q without the invalid: prefix", b, id)
		}
		if validateIdentity(id) == nil {
			t.Fatalf("invalid value %q decoded as the valid identity %q", b, id)
		}
		if len(id) > len("invalid:")+2+64*10 {
			t.Fatalf("decoded %d bytes into %d", len(b), len(id))
		}
	})
}

func TestValidateIdentityAcceptsDefault(t *testing.T) {
	if err := validateIdentity(election.DefaultIdentity()); err != nil {
		t.Fatal(err)
	}
}
