package kubefake

import (
	"cmp"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The watch cache. Every write is recorded as a change pending for the
// cache of its resource; the cache applies a resource's pending changes
// in order, and hands each to the open watches as it applies it. Reads
// from the cache see an object as it was before its first pending change.

// cacheRV is the resourceVersion the cache of gvr has reached: the newest
// write when nothing of gvr is pending, as the apiserver's progress
// notifications keep an idle cache current. The caller holds s.mu.
func (s *Server) cacheRV(gvr schema.GroupVersionResource) uint64 {
	if p := s.pending[gvr]; len(p) > 0 {
		return p[0].rv - 1
	}
	return s.rv
}

// follow applies what brings the cache of gvr within Config.CacheLag
// changes of the store, unless the cache is paused. The caller holds s.mu.
func (s *Server) follow(gvr schema.GroupVersionResource) {
	if s.paused {
		return
	}
	if n := len(s.pending[gvr]) - max(s.cfg.CacheLag, 0); n > 0 {
		s.apply(gvr, n)
	}
}

// applyThrough applies the pending changes of gvr up to resourceVersion
// rv. The caller holds s.mu.
func (s *Server) applyThrough(gvr schema.GroupVersionResource, rv uint64) {
	n := 0
	for _, c := range s.pending[gvr] {
		if c.rv > rv {
			break
		}
		n++
	}
	s.apply(gvr, n)
}

// apply applies the oldest n pending changes of gvr and hands them to the
// open watches, in order. The caller holds s.mu.
func (s *Server) apply(gvr schema.GroupVersionResource, n int) {
	p := s.pending[gvr]
	for _, c := range p[:n] {
		for _, w := range s.watchers {
			w.offer(c)
		}
	}
	if n == len(p) {
		delete(s.pending, gvr)
		return
	}
	s.pending[gvr] = append([]change(nil), p[n:]...)
}

// PauseCache stops the watch cache where it is, as an apiserver's cache
// stalls behind etcd: reads with resourceVersion "0" see the objects as
// they were, reads not older than a newer resourceVersion are refused
// with 504 (Too large resource version), and watches deliver nothing new,
// until SyncCache. Reads with no resourceVersion still see every write.
func (s *Server) PauseCache() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paused = true
}

// SyncCache brings the watch cache up to the store, delivering every
// pending change to the open watches in order, and lets it follow the
// store again, Config.CacheLag changes behind.
func (s *Server) SyncCache() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paused = false
	// Resource by resource, in the order of their oldest pending change,
	// so that the watches are woken in the same order in every run.
	gvrs := slices.Collect(maps.Keys(s.pending))
	slices.SortFunc(gvrs, func(a, b schema.GroupVersionResource) int {
		return cmp.Compare(s.pending[a][0].rv, s.pending[b][0].rv)
	})
	for _, gvr := range gvrs {
		s.apply(gvr, len(s.pending[gvr]))
	}
}
