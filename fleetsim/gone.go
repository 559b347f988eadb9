package fleetsim

import (
	"net/http"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
)

// gone is what one run's watches were answered 410 Gone from: the
// resourceVersions, by resource and selectors, the server could no longer
// serve. A watch from one of them again is a loop ([GoneRewatch]).
type gone struct {
	mu   sync.Mutex
	from map[string]bool // watchKey
}

// watchKey names a watch of one resource, in one namespace, with one set
// of selectors, from resourceVersion rv.
func watchKey(a k8stesting.WatchAction, rv string) string {
	r := a.GetWatchRestrictions()
	return a.GetResource().Resource + " " + a.GetNamespace() + restrictions(k8stesting.ListRestrictions{Labels: r.Labels, Fields: r.Fields}) +
		" from resourceVersion " + rv
}

// watchThrough serves a watch of s's current run by the reactors after the
// first (the world's own), and judges it: a watch from a resourceVersion
// the server already answered 410 Gone to for this run violates
// GoneRewatch, and a watch answered 410 is remembered. It runs inside the
// client, with the client's lock held, as the first watch reactor.
func (w *world) watchThrough(s *slot, a k8stesting.Action) (bool, watch.Interface, error) {
	wa, ok := a.(k8stesting.WatchAction)
	rv := ""
	if ok {
		rv = wa.GetWatchRestrictions().ResourceVersion
	}
	if rv == "" || rv == "0" {
		return false, nil, nil // from the newest state: never 410
	}
	key := watchKey(wa, rv)
	s.gone.mu.Lock()
	again := s.gone.from[key]
	s.gone.mu.Unlock()
	if again {
		w.violate(GoneRewatch, s.name, "watches %s again, which the server answered 410 Gone in this run: "+
			"a 410 must lead to one fresh read, and a watch from the resourceVersion it answers", key)
	}
	chain := s.kube.WatchReactionChain // the client's lock is held
	for _, r := range chain[1:] {
		if !r.Handles(a) {
			continue
		}
		handled, wi, err := r.React(a)
		if !handled {
			continue
		}
		if err == nil && wi != nil && isGone(&wi) {
			s.gone.mu.Lock()
			if s.gone.from == nil {
				s.gone.from = map[string]bool{}
			}
			s.gone.from[key] = true
			s.gone.mu.Unlock()
			w.tl.add(s.name, "watch %s: 410 Gone", key)
		}
		return true, wi, err
	}
	return false, nil, nil
}

// isGone reports whether *wi is a watch that was over before it began,
// its one event a 410 Gone, as the apiserver's watch cache answers a watch
// from before its history (kubefake sends it so: a closed channel holding
// the one event). It puts an equal watch in *wi, since reading the event
// took it.
func isGone(wi *watch.Interface) bool {
	ch := (*wi).ResultChan()
	if cap(ch) != 1 || len(ch) != 1 {
		return false
	}
	ev := <-ch // kubefake's live watches have unbuffered channels
	again := make(chan watch.Event, 1)
	again <- ev
	close(again)
	*wi = endedWatch(again)
	st, ok := ev.Object.(*metav1.Status)
	return ev.Type == watch.Error && ok && st.Code == http.StatusGone
}

// endedWatch is a watch over before it began: its channel holds its
// events and is closed.
type endedWatch <-chan watch.Event

func (w endedWatch) ResultChan() <-chan watch.Event { return w }
func (endedWatch) Stop()                            {}
