package kubefake

import (
	"net"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Client is one client of a Server: client-go's fake clientset (every
// typed client, reactor and tracker call works on it), whose requests
// travel a network of their own that a test can cut.
type Client struct {
	*fake.Clientset
	srv *Server
	// cut is written holding both link and srv.mu, and read holding
	// either. A request holds link (to read) from its last look at cut
	// until the store answered it, so that it either sees the cut or is
	// served before Cut returns.
	cut      bool
	link     sync.RWMutex
	requests requestCounter
	// watchDelay is SetWatchDelay's, a time.Duration.
	watchDelay atomic.Int64
	// landing, when set (by a test, before the client's first request),
	// is called with each request that passed the first look at cut,
	// before it meets the faults and the store: a test holds a request
	// there, in flight, to cut the client under it.
	landing func(k8stesting.Action)
}

// SetWatchDelay makes the client's watches hand over their events d
// later, on the server's clock, as a client further from the apiserver
// sees them: a watch that has events to deliver waits d, then delivers
// them and any that came meanwhile, in order. It applies to watches open
// and to come; 0, the default, delivers at once. Clients of one server
// with distinct delays see each change at distinct instants, which in a
// synctest bubble orders what they do about it.
func (c *Client) SetWatchDelay(d time.Duration) { c.watchDelay.Store(int64(d)) }

var _ kubernetes.Interface = (*Client)(nil)

// Server returns the server the client talks to.
func (c *Client) Server() *Server { return c.srv }

// Cut partitions the client from the server, as a dropped link or a
// proxy that stops forwarding: its open watches end (their result
// channels close), and every request fails, as a request to a server
// that refuses the connection does, with a *url.Error wrapping a
// *net.OpError and syscall.ECONNREFUSED (utilnet.IsConnectionRefused is
// true of it), until Heal. Nothing a cut request asked for happens.
func (c *Client) Cut() {
	s := c.srv
	c.link.Lock()
	defer c.link.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	c.cut = true
	for _, w := range slices.Clone(s.watchers) { // end removes w
		if w.client == c {
			w.end()
		}
	}
}

// Heal ends the partition Cut began. Watches that Cut ended stay ended;
// the client watches again, as after any broken connection.
func (c *Client) Heal() {
	c.link.Lock()
	defer c.link.Unlock()
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	c.cut = false
}

// refused returns the error a refused connection gives the request, or
// nil when the client is not cut.
func (c *Client) refused(a k8stesting.Action) error {
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	if !c.cut {
		return nil
	}
	return refused(a)
}

// serverAddr is where the fake apiserver pretends to listen.
const serverAddr = "127.0.0.1:6443"

// refused is the error client-go returns when the apiserver refuses the
// connection: net/http's *url.Error around the dialer's *net.OpError.
func refused(a k8stesting.Action) error {
	addr, _ := net.ResolveTCPAddr("tcp", serverAddr)
	return &url.Error{
		Op:  httpMethod(a.GetVerb()),
		URL: "https://" + serverAddr + requestPath(a),
		Err: &net.OpError{Op: "dial", Net: "tcp", Addr: addr, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)},
	}
}

// httpMethod is the method net/http names in a *url.Error (Get, Put...).
func httpMethod(verb string) string {
	switch verb {
	case "create":
		return "Post"
	case "update":
		return "Put"
	case "patch":
		return "Patch"
	case "delete", "delete-collection":
		return "Delete"
	}
	return "Get"
}

// requestPath is the REST path of the request, as the URL of the error.
func requestPath(a k8stesting.Action) string {
	gvr := a.GetResource()
	p := "/api/" + gvr.Version
	if gvr.Group != "" {
		p = path.Join("/apis", gvr.Group, gvr.Version)
	}
	if ns := a.GetNamespace(); ns != "" {
		p = path.Join(p, "namespaces", ns)
	}
	p = path.Join(p, gvr.Resource)
	if name := actionName(a); name != "" {
		p = path.Join(p, name)
	}
	if sub := a.GetSubresource(); sub != "" {
		p = path.Join(p, sub)
	}
	if a.GetVerb() == "watch" {
		p += "?watch=true"
	}
	return strings.TrimSuffix(p, "/")
}

// actionName is the name of the object the request is about, or "".
func actionName(a k8stesting.Action) string {
	switch a := a.(type) {
	case interface{ GetName() string }:
		return a.GetName()
	case interface{ GetObject() runtime.Object }:
		if m, err := meta.Accessor(a.GetObject()); err == nil {
			return m.GetName()
		}
	}
	return ""
}
