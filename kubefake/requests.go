package kubefake

import (
	"reflect"
	"sync"
	"unsafe"

	k8stesting "k8s.io/client-go/testing"
)

// Request is a kind of request a client makes.
type Request struct {
	// Verb is get, list, watch, create, update, patch, delete or
	// delete-collection.
	Verb string
	// Resource is plural and lower-case ("leases"); Subresource is
	// "status" and the like, or empty.
	Resource, Subresource string
}

// Requests counts requests by kind.
type Requests map[Request]int

// Total is the number of requests of every kind.
func (r Requests) Total() int {
	n := 0
	for _, c := range r {
		n += c
	}
	return n
}

// Sub returns the requests of r that earlier, a snapshot taken before
// r, does not count: those made between the two snapshots. Kinds with
// none are left out.
func (r Requests) Sub(earlier Requests) Requests {
	d := Requests{}
	for k, c := range r {
		if n := c - earlier[k]; n > 0 {
			d[k] = n
		}
	}
	return d
}

// requestCounter counts a client's requests.
type requestCounter struct {
	mu sync.Mutex
	n  Requests
}

func (rc *requestCounter) add(a k8stesting.Action) {
	k := Request{Verb: a.GetVerb(), Resource: a.GetResource().Resource, Subresource: a.GetSubresource()}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.n == nil {
		rc.n = Requests{}
	}
	rc.n[k]++
}

// Requests returns a snapshot of how many requests of each kind the
// client has sent to its server so far: every request that reached the
// client's place in its reactor chain, whatever its answer (a cut
// client's refused requests and injected faults count; a write that
// changed nothing counts). Requests answered by reactors a test
// prepended in front of the server, and so never sent, do not count.
// Two snapshots' difference (Sub) is what a loop sent between them,
// for budgets per unit of (fake) time.
func (c *Client) Requests() Requests {
	c.requests.mu.Lock()
	defer c.requests.mu.Unlock()
	out := make(Requests, len(c.requests.n))
	for k, n := range c.requests.n {
		out[k] = n
	}
	return out
}

// actionsOf returns the slice in which f records every request (what
// Actions returns), or nil when f no longer keeps one of that type. The
// slice is f's own and unexported: only code holding f's lock may touch
// it, as the reactors do (client-go's fake runs them under its lock).
func actionsOf(f *k8stesting.Fake) *[]k8stesting.Action {
	v := reflect.ValueOf(f).Elem().FieldByName("actions")
	if !v.IsValid() || v.Type() != reflect.TypeFor[[]k8stesting.Action]() {
		return nil
	}
	return (*[]k8stesting.Action)(unsafe.Pointer(v.UnsafeAddr()))
}

// trimActions keeps the newest Config.ActionHistory requests the fake
// recorded once it holds twice as many. It runs in a reactor, under the
// fake's lock, after the fake recorded the request the reactor serves.
func (c *Client) trimActions() {
	n := c.srv.cfg.ActionHistory
	if n <= 0 || c.actions == nil || len(*c.actions) < 2*n {
		return
	}
	*c.actions = append([]k8stesting.Action(nil), (*c.actions)[len(*c.actions)-n:]...)
}
