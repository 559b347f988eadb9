package versiongate

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/reconkit/reconkit/versiongate/versionpb"
)

// ErrCorruptStatus is wrapped by DecodeStatus errors: the stored status
// does not decode or lacks a required field. The gate treats such a status
// as absent (a leader reconciles and overwrites it; WaitReady waits).
var ErrCorruptStatus = errors.New("versiongate: corrupt status")

// State is the state of the reconciled state.
type State int

const (
	// StateWorking means a reconciler is changing the reconciled state:
	// it is between the state of the previous status and the state of the
	// status' version, and only nodes compatible with both may serve.
	StateWorking State = iota + 1
	// StateDone means reconciliation at the status' version finished.
	StateDone
)

// String returns "working", "done" or "unknown".
func (s State) String() string {
	switch s {
	case StateWorking:
		return "working"
	case StateDone:
		return "done"
	}
	return "unknown"
}

// Status is the reconciler status stored in etcd: who reconciled last and
// which node releases may serve on the reconciled state.
type Status struct {
	State State
	// Version is the version of the reconciler that wrote the status.
	Version Version
	// MinimumCompatibleRelease is the lowest node release allowed to pass
	// WaitReady.
	MinimumCompatibleRelease Release
}

// String describes the status for logs.
func (s Status) String() string {
	return fmt.Sprintf("%s at %s, minimum compatible release %s", s.State, s.Version, s.MinimumCompatibleRelease)
}

// Encode returns the status' protobuf encoding (versionpb.Status).
func (s Status) Encode() ([]byte, error) {
	var st versionpb.Status_State
	switch s.State {
	case StateWorking:
		st = versionpb.Status_STATE_WORKING
	case StateDone:
		st = versionpb.Status_STATE_DONE
	default:
		return nil, fmt.Errorf("versiongate: encode status: invalid state %d", s.State)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&versionpb.Status{
		State:                    st,
		Version:                  s.Version.proto(),
		MinimumCompatibleRelease: s.MinimumCompatibleRelease.proto(),
	})
	if err != nil {
		return nil, fmt.Errorf("versiongate: encode status: %w", err)
	}
	return b, nil
}

// DecodeStatus decodes a stored status. It returns an error wrapping
// ErrCorruptStatus if data is not a versionpb.Status or lacks the state,
// the version's release or the minimum compatible release. Unknown fields
// written by a newer release are ignored.
func DecodeStatus(data []byte) (Status, error) {
	var p versionpb.Status
	if err := proto.Unmarshal(data, &p); err != nil {
		return Status{}, fmt.Errorf("%w: %w", ErrCorruptStatus, err)
	}
	var s Status
	switch p.GetState() {
	case versionpb.Status_STATE_WORKING:
		s.State = StateWorking
	case versionpb.Status_STATE_DONE:
		s.State = StateDone
	default:
		return Status{}, fmt.Errorf("%w: unknown state %d", ErrCorruptStatus, p.GetState())
	}
	if p.GetVersion().GetRelease() == nil {
		return Status{}, fmt.Errorf("%w: no version", ErrCorruptStatus)
	}
	if p.GetMinimumCompatibleRelease() == nil {
		return Status{}, fmt.Errorf("%w: no minimum compatible release", ErrCorruptStatus)
	}
	s.Version = versionFromProto(p.GetVersion())
	s.MinimumCompatibleRelease = releaseFromProto(p.GetMinimumCompatibleRelease())
	return s, nil
}

// exists reports whether the store holds a status, decodable or not.
func (s StoredStatus) exists() bool { return s.Value != nil || s.Corrupt != nil }

// decode decodes the stored status: s.Corrupt if the store set it,
// otherwise what DecodeStatus makes of s.Value.
func (s StoredStatus) decode() (Status, error) {
	if s.Corrupt != nil {
		return Status{}, s.Corrupt
	}
	return DecodeStatus(s.Value)
}
