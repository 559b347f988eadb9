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

// LKGStore keeps checkpoints and remembers which one is current (assigned,
// possibly still on trial), which one is last-known-good, and when current
// was set. An empty ID in current or last-known-good means the host's local
// configuration.
//
// Implementations are safe for concurrent use, check ctx before doing I/O,
// and validate every ID (errors wrap [ErrInvalidID]). Payloads are copied in
// and out: callers may modify slices they pass or receive.
type LKGStore interface {
	// Initialize prepares the store for use, creating what is missing and
	// cleaning up after an interrupted write. It is idempotent.
	Initialize(ctx context.Context) error
	// Current returns the current checkpoint's ID, "" for local.
	Current(ctx context.Context) (string, error)
	// LastKnownGood returns the last-known-good checkpoint's ID, "" for
	// local.
	LastKnownGood(ctx context.Context) (string, error)
	// CurrentSetAt returns the time recorded by the last SetCurrent: the
	// start of the current checkpoint's trial. It is the zero time when
	// SetCurrent was never called or after Reset.
	CurrentSetAt(ctx context.Context) (time.Time, error)
	// Load returns the checkpoint with its hash verified. A missing
	// checkpoint wraps [ErrNotFound]; a damaged one wraps [ErrCorrupt].
	Load(ctx context.Context, id string) (*Checkpoint, error)
	// Save stores cp durably. Saving an ID that exists with the same
	// payload is a no-op; with a different payload it fails with
	// [ErrConflict]. An implementation may drop old checkpoints that are
	// neither current nor last-known-good to bound its history.
	Save(ctx context.Context, cp Checkpoint) error
	// SetCurrent makes id current ("" for local) and records at as the
	// start of its trial. A non-empty id must have been saved
	// ([ErrNotFound] otherwise).
	SetCurrent(ctx context.Context, id string, at time.Time) error
	// SetLastKnownGood makes id last-known-good ("" for local). A
	// non-empty id must have been saved ([ErrNotFound] otherwise).
	SetLastKnownGood(ctx context.Context, id string) error
	// Reset sets current and last-known-good to local and clears the trial
	// start. It reports whether current changed. Checkpoints stay stored.
	Reset(ctx context.Context) (bool, error)
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
