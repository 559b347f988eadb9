package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// On-disk format, version 1. See doc.go for the layout.
const (
	metaMagic       = "reconkit-checkpoint-meta v1\n"
	checkpointMagic = "reconkit-checkpoint v1\n"
	// maxMetaSize bounds what the metadata decoder accepts.
	maxMetaSize = 4096
	// maxHeaderSize bounds a checkpoint's header line.
	maxHeaderSize = 4096
)

// meta is the small record naming current, last-known-good and the trial
// start.
type meta struct {
	Current       string
	LastKnownGood string
	CurrentSetAt  time.Time
}

type metaJSON struct {
	Current       string `json:"current"`
	LastKnownGood string `json:"lastKnownGood"`
	// CurrentSetAt is Unix nanoseconds; 0 means unset.
	CurrentSetAt int64 `json:"currentSetAt"`
}

// encodeMeta returns the version-1 encoding of m: the magic line, one JSON
// line, and a line "sha256:<hex>" holding the SHA-256 of the JSON line
// (without its newline).
func encodeMeta(m meta) []byte {
	j := metaJSON{Current: m.Current, LastKnownGood: m.LastKnownGood}
	if !m.CurrentSetAt.IsZero() {
		j.CurrentSetAt = m.CurrentSetAt.UnixNano()
	}
	body, _ := json.Marshal(j) // cannot fail: strings and an integer
	return frame(metaMagic, body)
}

// frame joins magic, body and body's checksum line.
func frame(magic string, body []byte) []byte {
	sum := sha256.Sum256(body)
	var b bytes.Buffer
	b.Grow(len(magic) + len(body) + 1 + 7 + 64 + 1)
	b.WriteString(magic)
	b.Write(body)
	b.WriteByte('\n')
	b.WriteString("sha256:")
	b.WriteString(hex.EncodeToString(sum[:]))
	b.WriteByte('\n')
	return b.Bytes()
}

// unframe checks magic and the checksum line at the start of data and
// returns the JSON body and what follows the checksum line.
func unframe(magic string, data []byte, maxBody int) (body, rest []byte, err error) {
	if !bytes.HasPrefix(data, []byte(magic)) {
		n := min(len(data), len(magic))
		return nil, nil, fmt.Errorf("unknown format or version (starts %q)", data[:n])
	}
	data = data[len(magic):]
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 || nl > maxBody {
		return nil, nil, fmt.Errorf("header line missing, unterminated or longer than %d bytes", maxBody)
	}
	body, data = data[:nl], data[nl+1:]
	const sumLine = len("sha256:") + 64 + 1
	if len(data) < sumLine || !bytes.HasPrefix(data, []byte("sha256:")) || data[sumLine-1] != '\n' {
		return nil, nil, fmt.Errorf("checksum line missing or truncated")
	}
	want, err := hex.DecodeString(string(data[len("sha256:") : sumLine-1]))
	if err != nil {
		return nil, nil, fmt.Errorf("checksum line: %v", err)
	}
	got := sha256.Sum256(body)
	if !bytes.Equal(got[:], want) {
		return nil, nil, fmt.Errorf("header checksum mismatch")
	}
	return body, data[sumLine:], nil
}

// decodeMeta parses a metadata record. Every failure wraps [ErrCorrupt].
func decodeMeta(data []byte) (meta, error) {
	if len(data) > maxMetaSize {
		return meta{}, fmt.Errorf("metadata: %d bytes, more than %d: %w", len(data), maxMetaSize, ErrCorrupt)
	}
	body, rest, err := unframe(metaMagic, data, maxMetaSize)
	if err != nil {
		return meta{}, fmt.Errorf("metadata: %v: %w", err, ErrCorrupt)
	}
	if len(rest) != 0 {
		return meta{}, fmt.Errorf("metadata: %d trailing bytes: %w", len(rest), ErrCorrupt)
	}
	var j metaJSON
	if err := json.Unmarshal(body, &j); err != nil {
		return meta{}, fmt.Errorf("metadata: %v: %w", err, ErrCorrupt)
	}
	for _, id := range []string{j.Current, j.LastKnownGood} {
		if err := validateRef(id); err != nil {
			return meta{}, fmt.Errorf("metadata: %w: %w", err, ErrCorrupt)
		}
	}
	if j.CurrentSetAt < 0 {
		return meta{}, fmt.Errorf("metadata: negative trial start %d: %w", j.CurrentSetAt, ErrCorrupt)
	}
	m := meta{Current: j.Current, LastKnownGood: j.LastKnownGood}
	if j.CurrentSetAt != 0 {
		m.CurrentSetAt = time.Unix(0, j.CurrentSetAt)
	}
	return m, nil
}

// header is a checkpoint file's JSON header line.
type header struct {
	ID              string `json:"id"`
	Generation      uint64 `json:"generation"`
	Size            int64  `json:"size"`
	Hash            string `json:"hash"`
	UID             string `json:"uid,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	Origin          string `json:"origin,omitempty"`
	// Created is Unix nanoseconds; 0 means unknown.
	Created int64 `json:"created,omitempty"`
}

// encodeCheckpoint returns a checkpoint file: the magic line, the header
// JSON line, its checksum line, then the payload.
func encodeCheckpoint(cp Checkpoint, gen uint64) []byte {
	h := header{
		ID:              cp.ID,
		Generation:      gen,
		Size:            int64(len(cp.Payload)),
		Hash:            cp.Hash,
		UID:             cp.Source.UID,
		ResourceVersion: cp.Source.ResourceVersion,
		Origin:          cp.Source.Origin,
	}
	if !cp.Created.IsZero() {
		h.Created = cp.Created.UnixNano()
	}
	body, _ := json.Marshal(h) // cannot fail: strings and integers
	f := frame(checkpointMagic, body)
	out := make([]byte, len(f), len(f)+len(cp.Payload))
	copy(out, f)
	return append(out, cp.Payload...)
}

// decodeHeader parses and checks the header of a checkpoint file and
// returns it and the bytes after it. Failures wrap [ErrCorrupt].
func decodeHeader(data []byte) (header, []byte, error) {
	body, rest, err := unframe(checkpointMagic, data, maxHeaderSize)
	if err != nil {
		return header{}, nil, fmt.Errorf("%v: %w", err, ErrCorrupt)
	}
	var h header
	if err := json.Unmarshal(body, &h); err != nil {
		return header{}, nil, fmt.Errorf("header: %v: %w", err, ErrCorrupt)
	}
	return h, rest, nil
}

// decodeCheckpoint parses a whole checkpoint file and verifies its payload
// against the recorded size and hash. Failures wrap [ErrCorrupt].
func decodeCheckpoint(data []byte) (*Checkpoint, uint64, error) {
	h, payload, err := decodeHeader(data)
	if err != nil {
		return nil, 0, err
	}
	if err := ValidateID(h.ID); err != nil {
		return nil, 0, fmt.Errorf("header: %w: %w", err, ErrCorrupt)
	}
	if int64(len(payload)) != h.Size {
		return nil, 0, fmt.Errorf("payload is %d bytes, header says %d (truncated or extended): %w", len(payload), h.Size, ErrCorrupt)
	}
	if got := HashPayload(payload); got != h.Hash {
		return nil, 0, fmt.Errorf("payload hash %s does not match recorded %s: %w", got, h.Hash, ErrCorrupt)
	}
	cp := &Checkpoint{
		ID:      h.ID,
		Payload: payload,
		Hash:    h.Hash,
		Source:  Source{UID: h.UID, ResourceVersion: h.ResourceVersion, Origin: h.Origin},
	}
	if h.Created != 0 {
		cp.Created = time.Unix(0, h.Created)
	}
	return cp, h.Generation, nil
}
