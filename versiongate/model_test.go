package versiongate

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseRelease(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Release
		err  bool
	}{
		{in: "1.2.3", want: Release{1, 2, 3}},
		{in: "v0.0.0", want: Release{}},
		{in: "10.20.30", want: Release{10, 20, 30}},
		{in: "18446744073709551615.0.1", want: Release{^uint64(0), 0, 1}},
		{in: "", err: true},
		{in: "1.2", err: true},
		{in: "1.2.3.4", err: true},
		{in: "01.2.3", err: true},
		{in: "1.-2.3", err: true},
		{in: "1.+2.3", err: true},
		{in: "1.2.x", err: true},
		{in: "18446744073709551616.0.0", err: true},
		{in: "vv1.2.3", err: true},
	} {
		got, err := ParseRelease(tc.in)
		if tc.err {
			require.ErrorIs(t, err, ErrInvalidRelease, "input %q", tc.in)
			continue
		}
		require.NoError(t, err, "input %q", tc.in)
		require.Equal(t, tc.want, got)
		require.Equal(t, tc.want, mustRoundTrip(t, got))
	}
}

func mustRoundTrip(t *testing.T, r Release) Release {
	t.Helper()
	back, err := ParseRelease(r.String())
	require.NoError(t, err)
	return back
}

func TestReleaseCompare(t *testing.T) {
	order := []string{"0.0.0", "0.0.1", "0.1.0", "0.1.9", "0.10.0", "1.0.0", "1.0.10", "2.0.0"}
	for i, a := range order {
		for j, b := range order {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			require.Equal(t, want, rel(t, a).Compare(rel(t, b)), "%s vs %s", a, b)
			require.Equal(t, want < 0, rel(t, a).Less(rel(t, b)))
		}
	}
}

func TestParseVersion(t *testing.T) {
	v, err := ParseVersion("v1.2.3-rc.1+abc")
	require.NoError(t, err)
	require.Equal(t, Version{Release: Release{1, 2, 3}, PreRelease: "rc.1", Commit: "abc"}, v)
	require.Equal(t, "1.2.3-rc.1+abc", v.String())
	v, err = ParseVersion("1.2.3+g-1") // a commit may contain '-'
	require.NoError(t, err)
	require.Equal(t, Version{Release: Release{1, 2, 3}, Commit: "g-1"}, v)
	for _, bad := range []string{"1.2.3-", "1.2.3+", "1.2-rc", "x"} {
		_, err := ParseVersion(bad)
		require.ErrorIs(t, err, ErrInvalidRelease, bad)
	}
}

func TestStatusEncodeDecode(t *testing.T) {
	st := Status{State: StateWorking, Version: ver(t, "1.2.3-rc.1+abc"), MinimumCompatibleRelease: rel(t, "1.1.0")}
	b, err := st.Encode()
	require.NoError(t, err)
	got, err := DecodeStatus(b)
	require.NoError(t, err)
	require.Equal(t, st, got)

	// Zero releases are present, not missing.
	st = Status{State: StateDone}
	b, err = st.Encode()
	require.NoError(t, err)
	got, err = DecodeStatus(b)
	require.NoError(t, err)
	require.Equal(t, st, got)

	_, err = Status{}.Encode()
	require.Error(t, err)
}

func TestDecodeStatusCorrupt(t *testing.T) {
	for name, data := range map[string][]byte{
		"garbage":        []byte("\xff\xff\xff"),
		"empty":          {},
		"no state":       {0x12, 0x02, 0x0a, 0x00, 0x1a, 0x00},
		"no version":     {0x08, 0x02, 0x1a, 0x00},
		"no minimum":     {0x08, 0x02, 0x12, 0x02, 0x0a, 0x00},
		"unknown state":  {0x08, 0x07, 0x12, 0x02, 0x0a, 0x00, 0x1a, 0x00},
		"version no rel": {0x08, 0x02, 0x12, 0x00, 0x1a, 0x00},
	} {
		_, err := DecodeStatus(data)
		require.ErrorIs(t, err, ErrCorruptStatus, name)
	}
	// The well-formed variant of the above decodes.
	_, err := DecodeStatus([]byte{0x08, 0x02, 0x12, 0x02, 0x0a, 0x00, 0x1a, 0x00})
	require.NoError(t, err)
}

func TestNodeRecord(t *testing.T) {
	b, err := EncodeNodeRelease("n1", ver(t, "1.2.3"))
	require.NoError(t, err)
	id, v, err := DecodeNodeRelease(b)
	require.NoError(t, err)
	require.Equal(t, "n1", id)
	require.Equal(t, ver(t, "1.2.3"), v)

	dec := publishedDecoder
	r, member, err := dec("n1", b)
	require.NoError(t, err)
	require.True(t, member)
	require.Equal(t, rel(t, "1.2.3"), r)
	_, member, err = dec("n2", b)
	require.ErrorIs(t, err, ErrCorruptRecord)
	require.False(t, member)

	_, _, err = DecodeNodeRelease([]byte("\x0a\x02n1")) // no version
	require.ErrorIs(t, err, ErrCorruptRecord)
	_, err = EncodeNodeRelease("", Version{})
	require.Error(t, err)
}

func TestReady(t *testing.T) {
	st := Status{State: StateWorking, Version: ver(t, "1.1.0"), MinimumCompatibleRelease: rel(t, "1.0.0")}
	ok, _ := Ready(st, rel(t, "1.0.0"), rel(t, "1.0.0"))
	require.True(t, ok, "WORKING does not block")
	ok, why := Ready(st, rel(t, "0.9.0"), rel(t, "0.0.0"))
	require.False(t, ok)
	require.Contains(t, why, "below the minimum compatible release")
	ok, why = Ready(st, rel(t, "1.2.0"), rel(t, "1.2.0"))
	require.False(t, ok)
	require.Contains(t, why, "minimum reconciler release")
}

func TestDecide(t *testing.T) {
	target := Status{State: StateDone, Version: ver(t, "2.0.0"), MinimumCompatibleRelease: rel(t, "1.5.0")}
	require.Equal(t, ActionCreate, Decide(nil, target))
	same := target
	require.Equal(t, ActionLeave, Decide(&same, target))

	older := Status{State: StateDone, Version: ver(t, "1.9.0"), MinimumCompatibleRelease: rel(t, "1.5.0")}
	require.Equal(t, ActionSetWorking, Decide(&older, target))
	sameVersionWorking := target
	sameVersionWorking.State = StateWorking
	require.Equal(t, ActionSetWorking, Decide(&sameVersionWorking, target))

	// Admits 1.0 nodes, which the target state breaks.
	loose := Status{State: StateDone, Version: ver(t, "1.9.0"), MinimumCompatibleRelease: rel(t, "1.0.0")}
	require.Equal(t, ActionRestrict, Decide(&loose, target))
	require.Equal(t, Status{State: StateWorking, Version: ver(t, "1.9.0"), MinimumCompatibleRelease: rel(t, "1.5.0")},
		Restricted(loose, target))

	// Written by a newer reconciler: a downgrade restricts too.
	newer := Status{State: StateDone, Version: ver(t, "3.0.0"), MinimumCompatibleRelease: rel(t, "2.0.0")}
	require.Equal(t, ActionRestrict, Decide(&newer, target))
	require.Equal(t, Status{State: StateWorking, Version: ver(t, "2.0.0"), MinimumCompatibleRelease: rel(t, "2.0.0")},
		Restricted(newer, target))

	require.Equal(t, "restrict", ActionRestrict.String())
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := New(Config{})
	require.ErrorIs(t, err, ErrInvalidConfig)
	for _, want := range []string{"Store", "NodeID"} {
		require.Contains(t, err.Error(), want)
	}
	_, err = New(Config{RecordTTL: 1500e6, ReconcileJitter: 2,
		Version: Version{Release: Release{1, 0, 0}}, MinimumCompatibleRelease: Release{2, 0, 0}})
	for _, want := range []string{"RecordTTL", "ReconcileJitter", "exceeds the local release"} {
		require.Contains(t, err.Error(), want)
	}
	require.False(t, errors.Is(err, ErrCorruptStatus))
}
