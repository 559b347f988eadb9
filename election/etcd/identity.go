package etcd

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxIdentityLen bounds identities written to and read from etcd.
const maxIdentityLen = 1024

// validateIdentity checks an identity before it is written to etcd.
func validateIdentity(id string) error {
	switch {
	case id == "":
		return errors.New("empty")
	case len(id) > maxIdentityLen:
		return fmt.Errorf("%d bytes, more than %d", len(id), maxIdentityLen)
	case !utf8.ValidString(id):
		return errors.New("not valid UTF-8")
	case strings.HasPrefix(id, "invalid:"):
		return errors.New(`starts with "invalid:", which marks values that are not identities`)
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return fmt.Errorf("control character %U", r)
		}
	}
	return nil
}

// decodeIdentity turns a leader key's value, written by any candidate on
// the prefix, into an identity. A valid identity is returned as is; any
// other value (empty, too long, not UTF-8, with control characters) is
// returned quoted and truncated after an "invalid:" prefix, so that it is
// never empty (empty means no leader) and never equal to a valid identity.
func decodeIdentity(b []byte) string {
	if validateIdentity(string(b)) == nil {
		return string(b)
	}
	const show = 64
	if len(b) > show {
		b = b[:show]
	}
	return "invalid:" + strconv.QuoteToASCII(string(b))
}
