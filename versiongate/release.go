package versiongate

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/reconkit/reconkit/versiongate/versionpb"
)

// ErrInvalidRelease is wrapped by ParseRelease and ParseVersion errors.
var ErrInvalidRelease = errors.New("versiongate: invalid release")

// Release is a major.minor.patch release. Releases are ordered by major,
// then minor, then patch; the zero Release, 0.0.0, is the lowest.
type Release struct {
	Major, Minor, Patch uint64
}

// ParseRelease parses "major.minor.patch", with an optional leading "v".
// Each part is a decimal number without sign or leading zeros.
func ParseRelease(s string) (Release, error) {
	t := strings.TrimPrefix(s, "v")
	parts := strings.Split(t, ".")
	if len(parts) != 3 {
		return Release{}, fmt.Errorf("%w %q: want major.minor.patch", ErrInvalidRelease, s)
	}
	var n [3]uint64
	for i, p := range parts {
		if p == "" || (len(p) > 1 && p[0] == '0') || p[0] == '+' || p[0] == '-' {
			return Release{}, fmt.Errorf("%w %q: bad number %q", ErrInvalidRelease, s, p)
		}
		v, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return Release{}, fmt.Errorf("%w %q: bad number %q", ErrInvalidRelease, s, p)
		}
		n[i] = v
	}
	return Release{Major: n[0], Minor: n[1], Patch: n[2]}, nil
}

// Compare returns -1, 0 or +1 as r is lower than, equal to or higher than o.
func (r Release) Compare(o Release) int {
	if c := cmp.Compare(r.Major, o.Major); c != 0 {
		return c
	}
	if c := cmp.Compare(r.Minor, o.Minor); c != 0 {
		return c
	}
	return cmp.Compare(r.Patch, o.Patch)
}

// Less reports whether r is lower than o.
func (r Release) Less(o Release) bool { return r.Compare(o) < 0 }

// String returns "major.minor.patch".
func (r Release) String() string {
	var b [64]byte
	out := strconv.AppendUint(b[:0], r.Major, 10)
	out = append(out, '.')
	out = strconv.AppendUint(out, r.Minor, 10)
	out = append(out, '.')
	out = strconv.AppendUint(out, r.Patch, 10)
	return string(out)
}

func minRelease(a, b Release) Release {
	if a.Less(b) {
		return a
	}
	return b
}

func maxRelease(a, b Release) Release {
	if b.Less(a) {
		return a
	}
	return b
}

func (r Release) proto() *versionpb.Release {
	return &versionpb.Release{Major: r.Major, Minor: r.Minor, Patch: r.Patch}
}

func releaseFromProto(p *versionpb.Release) Release {
	return Release{Major: p.GetMajor(), Minor: p.GetMinor(), Patch: p.GetPatch()}
}

// Version is a release plus optional build details. Only the release takes
// part in every decision versiongate makes; the pre-release and commit are
// carried for operators.
type Version struct {
	Release Release
	// PreRelease is a semver pre-release such as "rc.1"; empty for a final
	// release.
	PreRelease string
	// Commit identifies the source the build came from; empty when unknown.
	Commit string
}

// ParseVersion parses "[v]major.minor.patch[-prerelease][+commit]".
func ParseVersion(s string) (Version, error) {
	var v Version
	rest := s
	if i := strings.IndexByte(rest, '+'); i >= 0 {
		v.Commit = rest[i+1:]
		rest = rest[:i]
		if v.Commit == "" {
			return Version{}, fmt.Errorf("%w %q: empty commit after '+'", ErrInvalidRelease, s)
		}
	}
	if i := strings.IndexByte(rest, '-'); i >= 0 {
		v.PreRelease = rest[i+1:]
		rest = rest[:i]
		if v.PreRelease == "" {
			return Version{}, fmt.Errorf("%w %q: empty pre-release after '-'", ErrInvalidRelease, s)
		}
	}
	r, err := ParseRelease(rest)
	if err != nil {
		return Version{}, fmt.Errorf("%w (in version %q)", err, s)
	}
	v.Release = r
	return v, nil
}

// String returns "major.minor.patch[-prerelease][+commit]".
func (v Version) String() string {
	s := v.Release.String()
	if v.PreRelease != "" {
		s += "-" + v.PreRelease
	}
	if v.Commit != "" {
		s += "+" + v.Commit
	}
	return s
}

func (v Version) proto() *versionpb.Version {
	return &versionpb.Version{Release: v.Release.proto(), PreRelease: v.PreRelease, Commit: v.Commit}
}

func versionFromProto(p *versionpb.Version) Version {
	return Version{Release: releaseFromProto(p.GetRelease()), PreRelease: p.GetPreRelease(), Commit: p.GetCommit()}
}
