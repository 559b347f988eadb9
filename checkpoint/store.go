package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Errors callers branch on. Every error the package returns for these cases
// wraps one of them, so test with [errors.Is].
var (
	// ErrInvalidID marks a checkpoint ID that is empty, too long, or could
	// escape the store's directory.
	ErrInvalidID = errors.New("checkpoint: invalid checkpoint ID")
	// ErrNotFound marks a checkpoint that the store does not hold.
	ErrNotFound = errors.New("checkpoint: checkpoint not found")
	// ErrCorrupt marks stored data that fails its checksum, is truncated,
	// is missing while referenced, or does not decode.
	ErrCorrupt = errors.New("checkpoint: stored data is corrupt")
	// ErrConflict marks a Save of an ID the store already holds with
	// different content. Checkpoints are immutable.
	ErrConflict = errors.New("checkpoint: checkpoint ID already holds different content")
	// ErrNotInitialized marks a store used before Initialize, or whose
	// directory has disappeared since.
	ErrNotInitialized = errors.New("checkpoint: store not initialized")
	// ErrInvalidState marks a State that SetState refuses.
	ErrInvalidState = errors.New("checkpoint: invalid state record")
	// ErrLocked marks a store directory another process (or another
	// FSStore in this process) holds.
	ErrLocked = errors.New("checkpoint: store is locked by another user")
)

// MaxIDLength is the longest checkpoint ID accepted, in bytes. It leaves
// room for the generation prefix within the common 255-byte file name limit.
const MaxIDLength = 200

// ValidateID reports whether id can name a checkpoint. A valid ID is
// non-empty UTF-8 of at most [MaxIDLength] bytes, is neither "." nor "..",
// and holds no path separator ('/' or '\\'), no control character and no
// NUL. The error wraps [ErrInvalidID].
func ValidateID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty", ErrInvalidID)
	case len(id) > MaxIDLength:
		return fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidID, len(id), MaxIDLength)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidID, id)
	case id == "." || id == "..":
		return fmt.Errorf("%w: %q", ErrInvalidID, id)
	case strings.ContainsAny(id, `/\`):
		return fmt.Errorf("%w: %q contains a path separator", ErrInvalidID, id)
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %q contains a control character", ErrInvalidID, id)
		}
	}
	return nil
}

// Source tells where a checkpoint's payload came from.
type Source struct {
	// UID identifies the origin object, such as a ConfigMap's UID.
	UID string
	// ResourceVersion is the origin object's version, if it has one.
	ResourceVersion string
	// Origin is a human-readable description, such as
	// "configmap kube-system/agent-config".
	Origin string
}

// ID returns the checkpoint ID for the source: the UID, followed by "_" and
// the resource version when there is one. The error wraps [ErrInvalidID].
// A source without a UID cannot name its checkpoints; [Controller.Assign]
// then names them by payload hash ([HashID]).
func (s Source) ID() (string, error) {
	id := s.UID
	if s.ResourceVersion != "" {
		id += "_" + s.ResourceVersion
	}
	if err := ValidateID(id); err != nil {
		return "", fmt.Errorf("source %q: %w", s.Origin, err)
	}
	return id, nil
}

// HashID returns the checkpoint ID of a payload whose source gives no
// stable identity: "sha256-" and the first 32 hex digits of its hash.
func HashID(payload []byte) string {
	return "sha256-" + strings.TrimPrefix(HashPayload(payload), "sha256:")[:32]
}

// Checkpoint is one stored configuration payload and its metadata.
type Checkpoint struct {
	// ID names the checkpoint; see [ValidateID].
	ID string
	// Payload is the configuration as the source delivered it.
	Payload []byte
	// Hash is "sha256:" and the lower-case hex SHA-256 of Payload. Save
	// fills it in; when the caller sets it, Save checks it.
	Hash string
	// Source tells where Payload came from.
	Source Source
	// Created is when the checkpoint was made, as the caller reports it.
	Created time.Time
}

// HashPayload returns the Hash a Checkpoint with this payload carries.
func HashPayload(p []byte) string {
	sum := sha256.Sum256(p)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// MaxRejected is how many rejected payload hashes a [State] keeps; the
// oldest are forgotten first.
const MaxRejected = 16

// maxMessage bounds a Failure's message in the store.
const maxMessage = 1024

// Failure records why a configuration was refused or rolled back. It is
// keyed by the payload's hash, so the same bytes under another checkpoint
// ID (a metadata-only edit of a ConfigMap) are refused too.
type Failure struct {
	// Hash is the refused payload's [HashPayload].
	Hash string
	// ID is the checkpoint that carried the payload.
	ID string
	// Reason is a ConfigOK reason, such as [ReasonProbeFailed].
	Reason string
	// Message says what failed, for people.
	Message string
	// At is when it failed, by the wall clock (for people only).
	At time.Time
}

// State is the persisted record of an [LKGStore], modelled on the kubelet's
// NodeConfigStatus: what is assigned, what is active, what is
// last-known-good, and why the assigned configuration is not active. An
// empty ID means the host's local configuration.
type State struct {
	// Assigned is the checkpoint the source assigned, even if it was
	// refused or rolled back.
	Assigned string
	// AssignedHash is the hash of Assigned's payload ("" for local).
	AssignedHash string
	// AssignedAt is when Assigned was assigned, by the wall clock. It is
	// for people; trials are never timed from it.
	AssignedAt time.Time
	// Active is the checkpoint the host runs.
	Active string
	// LastKnownGood is the newest checkpoint that passed its trial.
	LastKnownGood string
	// LastKnownGoodHash is the hash of LastKnownGood's payload.
	LastKnownGoodHash string
	// TriesLeft is how many more starts of a trial Assigned gets before it
	// is rolled back as a crash loop. A start consumes one try, and the
	// decrement is persisted before the trial starts.
	TriesLeft int
	// Error, if set, says why Assigned is not active.
	Error *Failure
	// Rejected lists refused payloads, oldest first, at most MaxRejected.
	Rejected []Failure
}

// RejectedHash returns the failure recorded for payload hash h, if any.
func (s State) RejectedHash(h string) (Failure, bool) {
	for i := len(s.Rejected) - 1; i >= 0; i-- {
		if s.Rejected[i].Hash == h {
			return s.Rejected[i], true
		}
	}
	return Failure{}, false
}

// Reject returns a copy of s with f recorded as a rejection (replacing an
// older one of the same hash, forgetting the oldest beyond MaxRejected) and
// as the Error of the assignment.
func (s State) Reject(f Failure) State {
	if len(f.Message) > maxMessage {
		f.Message = f.Message[:maxMessage]
	}
	rej := make([]Failure, 0, len(s.Rejected)+1)
	for _, r := range s.Rejected {
		if r.Hash != f.Hash {
			rej = append(rej, r)
		}
	}
	rej = append(rej, f)
	if len(rej) > MaxRejected {
		rej = rej[len(rej)-MaxRejected:]
	}
	s.Rejected = rej
	s.Error = &f
	return s
}

// clone returns a deep copy of s.
func (s State) clone() State {
	if s.Error != nil {
		e := *s.Error
		s.Error = &e
	}
	s.Rejected = append([]Failure(nil), s.Rejected...)
	return s
}

// refs returns the checkpoint IDs s refers to, which must be stored.
func (s State) refs() []string {
	return []string{s.Assigned, s.Active, s.LastKnownGood}
}

// Validate reports whether s can be stored: valid IDs, well-formed hashes,
// non-negative tries, at most MaxRejected rejections. The error wraps
// [ErrInvalidState] (or [ErrInvalidID]).
func (s State) Validate() error {
	for _, id := range s.refs() {
		if err := validateRef(id); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidState, err)
		}
	}
	if s.Error != nil {
		if err := validateRef(s.Error.ID); err != nil {
			return fmt.Errorf("%w: error: %w", ErrInvalidState, err)
		}
	}
	hashes := []string{s.AssignedHash, s.LastKnownGoodHash}
	if s.Error != nil {
		hashes = append(hashes, s.Error.Hash)
	}
	for _, r := range s.Rejected {
		hashes = append(hashes, r.Hash)
	}
	for _, h := range hashes {
		if h != "" && !validHash(h) {
			return fmt.Errorf("%w: malformed hash %q", ErrInvalidState, h)
		}
	}
	switch {
	case (s.Assigned == "") != (s.AssignedHash == ""):
		return fmt.Errorf("%w: assigned %q with hash %q", ErrInvalidState, s.Assigned, s.AssignedHash)
	case (s.LastKnownGood == "") != (s.LastKnownGoodHash == ""):
		return fmt.Errorf("%w: last-known-good %q with hash %q", ErrInvalidState, s.LastKnownGood, s.LastKnownGoodHash)
	case s.TriesLeft < 0:
		return fmt.Errorf("%w: %d tries left", ErrInvalidState, s.TriesLeft)
	case len(s.Rejected) > MaxRejected:
		return fmt.Errorf("%w: %d rejections, more than %d", ErrInvalidState, len(s.Rejected), MaxRejected)
	}
	return nil
}

func validHash(h string) bool {
	hexPart, ok := strings.CutPrefix(h, "sha256:")
	if !ok || len(hexPart) != 64 {
		return false
	}
	_, err := hex.DecodeString(hexPart)
	return err == nil && strings.ToLower(hexPart) == hexPart
}

// LKGStore keeps checkpoints and the [State] record naming which of them is
// assigned, active and last-known-good.
//
// Implementations are safe for concurrent use, check ctx before doing I/O,
// and validate every ID (errors wrap [ErrInvalidID]). Payloads are copied in
// and out: callers may modify slices they pass or receive.
type LKGStore interface {
	// Initialize prepares the store for use, creating what is missing and
	// cleaning up after an interrupted write. It is idempotent.
	Initialize(ctx context.Context) error
	// State returns the persisted record. A fresh store returns the zero
	// State. A record that cannot be read wraps [ErrCorrupt].
	State(ctx context.Context) (State, error)
	// SetState replaces the record atomically and durably. It validates st
	// ([ErrInvalidState]), and every checkpoint st refers to must have been
	// saved ([ErrNotFound] otherwise).
	SetState(ctx context.Context, st State) error
	// Load returns the checkpoint with its hash verified. A missing
	// checkpoint wraps [ErrNotFound]; a damaged one wraps [ErrCorrupt].
	Load(ctx context.Context, id string) (*Checkpoint, error)
	// Save stores cp durably. Saving an ID that exists with the same
	// payload is a no-op; with a different payload it fails with
	// [ErrConflict]. An implementation may drop old checkpoints that the
	// record does not refer to, to bound its history.
	Save(ctx context.Context, cp Checkpoint) error
}

// validateRef checks an ID used as a reference, where "" means local.
func validateRef(id string) error {
	if id == "" {
		return nil
	}
	return ValidateID(id)
}

// prepare validates cp and returns a copy with its hash filled in.
func prepare(cp Checkpoint) (Checkpoint, error) {
	if err := ValidateID(cp.ID); err != nil {
		return Checkpoint{}, err
	}
	h := HashPayload(cp.Payload)
	if cp.Hash != "" && cp.Hash != h {
		return Checkpoint{}, fmt.Errorf("checkpoint %q: payload hash is %s, caller said %s: %w", cp.ID, h, cp.Hash, ErrCorrupt)
	}
	cp.Hash = h
	cp.Payload = append([]byte(nil), cp.Payload...)
	return cp, nil
}
