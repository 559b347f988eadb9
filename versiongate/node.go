package versiongate

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/reconkit/reconkit/versiongate/versionpb"
)

// ErrCorruptRecord is wrapped by DecodeNodeRelease errors.
var ErrCorruptRecord = errors.New("versiongate: corrupt node record")

// Node is one node as the gate counts it.
type Node struct {
	// ID is the node's identity: its record's key without the nodes
	// prefix.
	ID string
	// Release is the release the node runs.
	Release Release
	// Unknown is set when the node's record does not decode (or its store
	// reports it corrupt): its release is unknown, Release is the zero
	// release, and the node blocks every restriction.
	Unknown bool
}

// String returns "id@release", or "id@unknown" for a node whose record
// does not decode.
func (n Node) String() string {
	if n.Unknown {
		return n.ID + "@unknown"
	}
	return n.ID + "@" + n.Release.String()
}

// DecodeFunc decodes a node record the host owns (Config.Decode): id is
// the record's ID (on etcd, its key without the nodes prefix) and value its
// non-empty value. It returns the
// node's release and whether the record counts as a member at all (for
// example only nodes with a certain role, and only once they report a
// release). An error is logged and the record counted as a member of
// unknown release (the zero release, so it blocks every restriction until
// it decodes or goes): a record the gate cannot read may be a node that
// still serves an old release. It never stops the gate; return member
// false, not an error, for records that are not nodes.
//
// DecodeFunc is called from the gate's single watcher goroutine, never
// concurrently with itself; it must not block and must not keep value.
type DecodeFunc func(id string, value []byte) (release Release, member bool, err error)

// EncodeNodeRelease returns the record a node publishes when the gate owns
// the records (versionpb.NodeRelease).
func EncodeNodeRelease(id string, v Version) ([]byte, error) {
	if id == "" {
		return nil, errors.New("versiongate: encode node record: empty node ID")
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&versionpb.NodeRelease{NodeId: id, Version: v.proto()})
	if err != nil {
		return nil, fmt.Errorf("versiongate: encode node record: %w", err)
	}
	return b, nil
}

// DecodeNodeRelease decodes a record written by EncodeNodeRelease. It
// returns an error wrapping ErrCorruptRecord when value does not decode or
// lacks the node ID or the version's release.
func DecodeNodeRelease(value []byte) (id string, v Version, err error) {
	var p versionpb.NodeRelease
	if err := proto.Unmarshal(value, &p); err != nil {
		return "", Version{}, fmt.Errorf("%w: %w", ErrCorruptRecord, err)
	}
	if p.GetNodeId() == "" {
		return "", Version{}, fmt.Errorf("%w: no node ID", ErrCorruptRecord)
	}
	if p.GetVersion().GetRelease() == nil {
		return "", Version{}, fmt.Errorf("%w: no version", ErrCorruptRecord)
	}
	return p.GetNodeId(), versionFromProto(p.GetVersion()), nil
}

// publishedDecoder decodes records the gate publishes; a record whose
// node ID does not match its record ID is corrupt.
func publishedDecoder(want string, value []byte) (Release, bool, error) {
	id, v, err := DecodeNodeRelease(value)
	if err != nil {
		return Release{}, false, err
	}
	if id != want {
		return Release{}, false, fmt.Errorf("%w: node ID %q in the record of %q", ErrCorruptRecord, id, want)
	}
	return v.Release, true, nil
}
