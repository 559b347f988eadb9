package checkpoint

import (
	"fmt"
	"strconv"

	"github.com/go-logr/logr"
)

// fileName is a checkpoint's file name: its generation in fixed-width hex,
// "-", and its ID. Sorting names sorts generations.
func fileName(gen uint64, id string) string {
	return fmt.Sprintf("%0*x-%s", genDigits, gen, id)
}

// parseFileName splits a checkpoint file name; ok is false for any other
// name.
func parseFileName(name string) (gen uint64, id string, ok bool) {
	if len(name) < genDigits+2 || name[genDigits] != '-' {
		return 0, "", false
	}
	gen, err := strconv.ParseUint(name[:genDigits], 16, 64)
	if err != nil {
		return 0, "", false
	}
	id = name[genDigits+1:]
	if ValidateID(id) != nil {
		return 0, "", false
	}
	return gen, id, true
}

// scanCheckpoints indexes the checkpoint files by name alone.
func (s *FSStore) scanCheckpoints(log logr.Logger) (map[string]uint64, uint64, error) {
	entries, err := s.fs.ReadDir(s.ckDir)
	if err != nil {
		return nil, 0, err
	}
	index := make(map[string]uint64, len(entries))
	var maxGen uint64
	for _, e := range entries {
		gen, id, ok := parseFileName(e.Name())
		if !ok || !e.Type().IsRegular() {
			log.Info("ignoring unexpected entry in checkpoint directory", "name", e.Name())
			continue
		}
		if old, dup := index[id]; dup {
			// Only a crash between writing a replacement and removing
			// the damaged original leaves two; the newer one wins.
			gen = max(gen, old)
		}
		index[id] = gen
		maxGen = max(maxGen, gen)
	}
	return index, maxGen, nil
}
