package kubefake

import (
	"sync"

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
