package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// On-disk format. See doc.go for the layout. Checkpoint files are version
// 1; the state record is version 2 (version 1 named only current and
// last-known-good).
const (
	metaMagic       = "reconkit-checkpoint-state v2\n"
	checkpointMagic = "reconkit-checkpoint v1\n"
	// legacyMetaMagic starts the version-1 record, read once to upgrade.
	legacyMetaMagic = "reconkit-checkpoint-meta v1\n"
	// maxMetaSize bounds what the state decoder accepts.
	maxMetaSize = 64 << 10
	// maxHeaderSize bounds a checkpoint's header line.
	maxHeaderSize = 4096
)

type failureJSON struct {
	Hash    string `json:"hash"`
	ID      string `json:"id,omitempty"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
	// At is Unix nanoseconds; 0 means unknown.
	At int64 `json:"at,omitempty"`
}

type metaJSON struct {
	// Generation increases with every write of the record; of two intact
	// copies the higher wins.
	Generation        uint64        `json:"generation"`
	Assigned          string        `json:"assigned"`
	AssignedHash      string        `json:"assignedHash,omitempty"`
	AssignedAt        int64         `json:"assignedAt,omitempty"`
	Active            string        `json:"active"`
	LastKnownGood     string        `json:"lastKnownGood"`
	LastKnownGoodHash string        `json:"lastKnownGoodHash,omitempty"`
	TriesLeft         int           `json:"triesLeft"`
	Error             *failureJSON  `json:"error,omitempty"`
	Rejected          []failureJSON `json:"rejected,omitempty"`
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func toFailureJSON(f Failure) failureJSON {
	return failureJSON{Hash: f.Hash, ID: f.ID, Reason: f.Reason, Message: f.Message, At: unixNano(f.At)}
}

func fromFailureJSON(f failureJSON) Failure {
	return Failure{Hash: f.Hash, ID: f.ID, Reason: f.Reason, Message: f.Message, At: fromUnixNano(f.At)}
}

// encodeMeta returns the encoding of st at generation gen: the magic line,
// one JSON line, and a line "sha256:<hex>" holding the SHA-256 of the JSON
// line (without its newline).
func encodeMeta(st State, gen uint64) []byte {
	j := metaJSON{
		Generation: gen, Assigned: st.Assigned, AssignedHash: st.AssignedHash, AssignedAt: unixNano(st.AssignedAt),
		Active: st.Active, LastKnownGood: st.LastKnownGood, LastKnownGoodHash: st.LastKnownGoodHash, TriesLeft: st.TriesLeft,
	}
	if st.Error != nil {
		e := toFailureJSON(*st.Error)
		j.Error = &e
	}
	for _, r := range st.Rejected {
		j.Rejected = append(j.Rejected, toFailureJSON(r))
	}
	body, _ := json.Marshal(j) // cannot fail: strings and integers
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

// decodeMeta parses a state record and returns it with its generation.
// Every failure wraps [ErrCorrupt].
func decodeMeta(data []byte) (State, uint64, error) {
	if len(data) > maxMetaSize {
		return State{}, 0, fmt.Errorf("state record: %d bytes, more than %d: %w", len(data), maxMetaSize, ErrCorrupt)
	}
	body, rest, err := unframe(metaMagic, data, maxMetaSize)
	if err != nil {
		return State{}, 0, fmt.Errorf("state record: %v: %w", err, ErrCorrupt)
	}
	if len(rest) != 0 {
		return State{}, 0, fmt.Errorf("state record: %d trailing bytes: %w", len(rest), ErrCorrupt)
	}
	var j metaJSON
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return State{}, 0, fmt.Errorf("state record: %v: %w", err, ErrCorrupt)
	}
	if j.AssignedAt < 0 {
		return State{}, 0, fmt.Errorf("state record: negative assignment time %d: %w", j.AssignedAt, ErrCorrupt)
	}
	st := State{
		Assigned: j.Assigned, AssignedHash: j.AssignedHash, AssignedAt: fromUnixNano(j.AssignedAt),
		Active: j.Active, LastKnownGood: j.LastKnownGood, LastKnownGoodHash: j.LastKnownGoodHash, TriesLeft: j.TriesLeft,
	}
	if j.Error != nil {
		e := fromFailureJSON(*j.Error)
		st.Error = &e
	}
	for _, r := range j.Rejected {
		st.Rejected = append(st.Rejected, fromFailureJSON(r))
	}
	if err := st.Validate(); err != nil {
		return State{}, 0, fmt.Errorf("state record: %w: %w", err, ErrCorrupt)
	}
	return st, j.Generation, nil
}

// legacyMeta is what a version-1 record names.
type legacyMeta struct {
	Current       string `json:"current"`
	LastKnownGood string `json:"lastKnownGood"`
}

// decodeLegacyMeta parses a version-1 record. Failures wrap [ErrCorrupt].
func decodeLegacyMeta(data []byte) (legacyMeta, error) {
	body, rest, err := unframe(legacyMetaMagic, data, maxMetaSize)
	if err == nil && len(rest) != 0 {
		err = fmt.Errorf("%d trailing bytes", len(rest))
	}
	var m legacyMeta
	if err == nil {
		err = json.Unmarshal(body, &m)
	}
	if err == nil {
		for _, id := range []string{m.Current, m.LastKnownGood} {
			if verr := validateRef(id); verr != nil {
				err = verr
			}
		}
	}
	if err != nil {
		return legacyMeta{}, fmt.Errorf("version-1 metadata: %v: %w", err, ErrCorrupt)
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
