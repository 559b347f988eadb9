package checkpoint

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"
)

// FuzzDecodeMeta feeds arbitrary bytes to the state-record decoder: it
// must never panic, must reject anything it cannot decode with ErrCorrupt,
// and whatever it accepts must be a valid State that re-encodes to a record
// decoding to the same value.
func FuzzDecodeMeta(f *testing.F) {
	h1, h2 := HashPayload([]byte("one")), HashPayload([]byte("two"))
	f.Add(encodeMeta(State{}, 1))
	f.Add(encodeMeta(State{Assigned: "uid-1_7", AssignedHash: h1, AssignedAt: time.Unix(1700000000, 42), Active: "uid-1_7",
		LastKnownGood: "uid-0_3", LastKnownGoodHash: h2, TriesLeft: 2}, 9))
	bad := Failure{Hash: h1, ID: "uid-1_7", Reason: "TrialProbeFailed", Message: "probe failed", At: time.Unix(1700000001, 0)}
	f.Add(encodeMeta(State{Assigned: "uid-1_7", AssignedHash: h1, Active: "", Error: &bad, Rejected: []Failure{bad}}, 12))
	f.Add([]byte(metaMagic + `{"assigned":"../etc"}` + "\nsha256:00\n"))
	f.Add([]byte(""))
	f.Add([]byte(metaMagic))
	f.Add(encodeMeta(State{Assigned: "x", AssignedHash: h1}, 3)[:40])
	f.Fuzz(func(t *testing.T, data []byte) {
		st, gen, err := decodeMeta(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if err := st.Validate(); err != nil {
			t.Fatalf("accepted an invalid state: %v", err)
		}
		again, gen2, err := decodeMeta(encodeMeta(st, gen))
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if gen2 != gen || !reflect.DeepEqual(normalize(again), normalize(st)) {
			t.Fatalf("round trip changed %+v to %+v", st, again)
		}
	})
}

// FuzzDecodeLegacyMeta: the version-1 decoder, read once to upgrade a
// store, never panics, fails with ErrCorrupt, and accepts only valid IDs.
func FuzzDecodeLegacyMeta(f *testing.F) {
	f.Add([]byte(legacyMetaMagic + `{"current":"a","lastKnownGood":"b","currentSetAt":5}` + "\nsha256:00\n"))
	f.Add([]byte(legacyMetaMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeLegacyMeta(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if validateRef(m.Current) != nil || validateRef(m.LastKnownGood) != nil {
			t.Fatalf("accepted invalid IDs %+v", m)
		}
	})
}

// normalize makes times comparable with DeepEqual.
func normalize(s State) State {
	s = s.clone()
	s.AssignedAt = time.Unix(0, unixNano(s.AssignedAt))
	if s.Error != nil {
		s.Error.At = time.Unix(0, unixNano(s.Error.At))
	}
	for i := range s.Rejected {
		s.Rejected[i].At = time.Unix(0, unixNano(s.Rejected[i].At))
	}
	return s
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
