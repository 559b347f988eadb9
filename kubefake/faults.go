package kubefake

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
)

// Fault is an answer the server gives in place of the one the store
// would, to the requests it matches. Empty fields match anything.
type Fault struct {
	// Verb is the request's verb: get, list, watch, create, update,
	// patch, delete, delete-collection.
	Verb string
	// Resource is the resource, plural and lower-case ("leases").
	Resource string
	// Subresource is the subresource ("status"); empty matches requests
	// to the resource and to any of its subresources.
	Subresource string
	// Namespace and Name are the object's.
	Namespace, Name string
	// Match, when set, must also hold of the request.
	Match func(k8stesting.Action) bool

	// Answer is the error the request gets. It may return nil to let the
	// request through (a rate limit under its rate does); a nil Answer is
	// InternalError(). Answers run with the server's lock held, in the
	// order requests arrive, and must not call the server or its clients.
	Answer Answer
	// Times is how many requests the fault answers before it is spent;
	// 0 means every matching request, until Server.ClearFaults.
	Times int
	// AfterWrite serves the request first, then answers Answer's error in
	// place of the store's answer: the write happened but its answer was
	// lost, as when a connection breaks or the apiserver times out after
	// etcd committed. A client that retries must find its own write.
	// A watch ignores it.
	AfterWrite bool
}

// Answer makes a fault's error from the request it answers.
type Answer func(k8stesting.Action) error

// Inject adds a fault. Faults are tried in the order they were injected;
// the first that matches a request and answers it with an error is the
// one that counts it.
func (s *Server) Inject(f Fault) {
	if f.Answer == nil {
		f.Answer = InternalError()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// fault returns the fault that answers the request and its error, or nil.
func (s *Server) fault(a k8stesting.Action) (*Fault, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if !f.matches(a) {
			continue
		}
		err := f.Answer(a)
		if err == nil {
			continue
		}
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			}
		}
		return f, err
	}
	return nil, nil
}

func (f *Fault) matches(a k8stesting.Action) bool {
	return (f.Verb == "" || f.Verb == a.GetVerb()) &&
		(f.Resource == "" || f.Resource == a.GetResource().Resource) &&
		(f.Subresource == "" || f.Subresource == a.GetSubresource()) &&
		(f.Namespace == "" || f.Namespace == a.GetNamespace()) &&
		(f.Name == "" || f.Name == actionName(a)) &&
		(f.Match == nil || f.Match(a))
}

// LostAnswer is a fault on the next request with verb on the named
// object: the server applies it, and the client gets a 504 Timeout in
// place of the answer, so whether the write happened is for it to find
// out.
func LostAnswer(verb, resource, name string) Fault {
	return Fault{Verb: verb, Resource: resource, Name: name, Answer: Timeout(), AfterWrite: true, Times: 1}
}

// Fail answers err.
func Fail(err error) Answer {
	return func(k8stesting.Action) error { return err }
}

// TooManyRequests answers 429 with a Retry-After of the given seconds,
// as the apiserver's priority and fairness does when a flow's queue is
// full. client-go's REST client would wait and retry it by itself (up to
// 10 times); this fake's clientset hands it to the caller at once.
func TooManyRequests(retryAfterSeconds int) Answer {
	return func(k8stesting.Action) error {
		return apierrors.NewTooManyRequests("the server has received too many requests and has asked us to try again later", retryAfterSeconds)
	}
}

// InternalError answers 500.
func InternalError() Answer {
	return func(k8stesting.Action) error {
		return apierrors.NewInternalError(errors.New("kubefake: injected internal error"))
	}
}

// Unavailable answers 503, as an apiserver that is starting or cannot
// reach etcd does.
func Unavailable() Answer {
	return func(k8stesting.Action) error {
		return apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
	}
}

// Conflict answers 409 for the request's object, as a write that lost a
// race does.
func Conflict() Answer {
	return func(a k8stesting.Action) error {
		return conflict(a.GetResource(), actionName(a))
	}
}

// Timeout answers 504, as the apiserver does when a request outlives its
// --request-timeout; a write may have happened all the same.
func Timeout() Answer {
	return func(k8stesting.Action) error {
		return apierrors.NewTimeoutError("request did not complete within requested timeout - context deadline exceeded", 0)
	}
}

// ServerTimeout answers 500 ServerTimeout with a Retry-After of the given
// seconds, as the apiserver does when storage does not answer in time.
func ServerTimeout(retryAfterSeconds int) Answer {
	return func(a k8stesting.Action) error {
		return apierrors.NewServerTimeout(a.GetResource().GroupResource(), a.GetVerb(), retryAfterSeconds)
	}
}

// ConnectionReset answers as a connection the server reset does: a
// *url.Error wrapping syscall.ECONNRESET (utilnet.IsConnectionReset and
// utilnet.IsProbableEOF are true of it).
func ConnectionReset() Answer {
	return func(a k8stesting.Action) error {
		addr, _ := net.ResolveTCPAddr("tcp", serverAddr)
		return &url.Error{
			Op:  httpMethod(a.GetVerb()),
			URL: "https://" + serverAddr + requestPath(a),
			Err: &net.OpError{Op: "read", Net: "tcp", Addr: addr, Err: os.NewSyscallError("read", syscall.ECONNRESET)},
		}
	}
}

// RateLimit lets burst requests through at once and then one per every
// on clk, and answers the others 429 with a Retry-After of the seconds
// until the next one may pass, as a token bucket does.
func RateLimit(clk clock.PassiveClock, every time.Duration, burst int) Answer {
	burst = max(burst, 1)
	var tokens float64
	var last time.Time
	return func(k8stesting.Action) error {
		now := clk.Now()
		if last.IsZero() {
			tokens = float64(burst)
		} else if every > 0 {
			tokens = math.Min(float64(burst), tokens+float64(now.Sub(last))/float64(every))
		} else {
			tokens = float64(burst)
		}
		last = now
		if tokens >= 1 {
			tokens--
			return nil
		}
		wait := time.Duration((1 - tokens) * float64(every))
		return apierrors.NewTooManyRequests(fmt.Sprintf("rate limited: %d requests per %s", burst, every),
			int(math.Ceil(wait.Seconds())))
	}
}
