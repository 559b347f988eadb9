package versiongate

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzDecodeStatus: any bytes either decode into a status that encodes and
// decodes to itself, or fail with ErrCorruptStatus; never a panic.
func FuzzDecodeStatus(f *testing.F) {
	for _, st := range []Status{
		{State: StateDone, Version: Version{Release: Release{1, 2, 3}}, MinimumCompatibleRelease: Release{1, 0, 0}},
		{State: StateWorking, Version: Version{Release: Release{0, 1, 0}, PreRelease: "rc.1", Commit: "abc"}},
	} {
		b, err := st.Encode()
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte("\x08\x02garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := DecodeStatus(data)
		if err != nil {
			require.ErrorIs(t, err, ErrCorruptStatus)
			return
		}
		b, err := st.Encode()
		require.NoError(t, err)
		again, err := DecodeStatus(b)
		require.NoError(t, err)
		require.Equal(t, st, again)
	})
}

// FuzzDecodeNodeRelease: the gate-owned record decoder and the registry
// decoder used in tests never panic, and accepted records round-trip.
func FuzzDecodeNodeRelease(f *testing.F) {
	b, err := EncodeNodeRelease("node-1", Version{Release: Release{1, 2, 3}, Commit: "abc"})
	require.NoError(f, err)
	f.Add("/nodes/node-1", b)
	f.Add("/nodes/node-2", b)
	f.Add("/nodes/x", []byte{0x0a, 0x01, 'x'})
	f.Add("/nodes/x", []byte(`{"roles":["controller"],"release":"1.2.3"}`))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		// The seed corpus holds etcd keys; the decoder takes record IDs.
		id := strings.TrimPrefix(key, "/nodes/")
		rel, member, err := publishedDecoder(id, value)
		if err != nil {
			require.ErrorIs(t, err, ErrCorruptRecord)
			require.False(t, member)
		} else {
			require.True(t, member)
			got, v, err := DecodeNodeRelease(value)
			require.NoError(t, err)
			require.Equal(t, id, got)
			require.Equal(t, rel, v.Release)
			again, err := EncodeNodeRelease(got, v)
			require.NoError(t, err)
			_, v2, err := DecodeNodeRelease(again)
			require.NoError(t, err)
			require.Equal(t, v, v2)
		}
		_, _, _ = decodeRegistry(id, value)
	})
}

// FuzzParseVersion: parsing never panics, and what parses prints back to a
// string that parses to the same version.
func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"1.2.3", "v0.0.1-rc.1+abc", "1.2", "01.2.3", "1.2.3-", "18446744073709551615.0.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidRelease)
			return
		}
		again, err := ParseVersion(v.String())
		require.NoError(t, err)
		require.Equal(t, v, again)
	})
}
