package checkpoint

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// FuzzDecodeMeta feeds arbitrary bytes to the metadata decoder: it must
// never panic, must reject anything it cannot decode with ErrCorrupt, and
// whatever it accepts must re-encode to the same bytes and hold only valid
// IDs.
func FuzzDecodeMeta(f *testing.F) {
	f.Add(encodeMeta(meta{}))
	f.Add(encodeMeta(meta{Current: "uid-1_7", LastKnownGood: "uid-0_3", CurrentSetAt: time.Unix(1700000000, 42)}))
	f.Add(encodeMeta(meta{Current: "a", LastKnownGood: "a"}))
	f.Add([]byte(metaMagic + `{"current":"../etc"}` + "\nsha256:00\n"))
	f.Add([]byte(""))
	f.Add([]byte(metaMagic))
	f.Add(encodeMeta(meta{Current: "x"})[:40])
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeMeta(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		for _, id := range []string{m.Current, m.LastKnownGood} {
			if validateRef(id) != nil {
				t.Fatalf("accepted invalid ID %q", id)
			}
		}
		again, err := decodeMeta(encodeMeta(m))
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if again.Current != m.Current || again.LastKnownGood != m.LastKnownGood || !again.CurrentSetAt.Equal(m.CurrentSetAt) {
			t.Fatalf("round trip changed %+v to %+v", m, again)
		}
	})
}

// FuzzDecodeCheckpoint does the same for checkpoint files: no panic,
// failures wrap ErrCorrupt, and an accepted file's payload matches its hash.
func FuzzDecodeCheckpoint(f *testing.F) {
	cp := Checkpoint{ID: "uid_1", Payload: []byte("hello"), Source: Source{UID: "uid", ResourceVersion: "1"}}
	cp.Hash = HashPayload(cp.Payload)
	good := encodeCheckpoint(cp, 3)
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(append(bytes.Clone(good), 'x'))
	f.Add([]byte(checkpointMagic + "{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, _, err := decodeCheckpoint(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if HashPayload(got.Payload) != got.Hash || ValidateID(got.ID) != nil {
			t.Fatalf("accepted inconsistent checkpoint %+v", got)
		}
	})
}
