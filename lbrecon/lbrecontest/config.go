package lbrecontest

import (
	"net/netip"
	"time"

	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/lbrecon"
)

// Config configures an [Engine]. The zero value is an instant, consistent
// engine without integrity checks.
type Config struct {
	// Clock measures latency, pending periods and lags; nil means the real
	// clock.
	Clock clock.Clock
	// Latency is how long every call takes.
	Latency time.Duration
	// Pending is how long a created or repaired object stays pending.
	Pending time.Duration
	// Repair makes the engine repair failed objects in place; without it,
	// Repair returns an error wrapping lbrecon.ErrNotSupported.
	Repair bool
	// NoUpdate makes Update return an error wrapping
	// lbrecon.ErrNotSupported.
	NoUpdate bool
	// NothingTagged makes List fail with an error wrapping
	// lbrecon.ErrNotFound when no object carries the tag, like providers that
	// answer an empty tag query with an error.
	NothingTagged bool

	// ListLag is how long List lags behind writes: a created object is not
	// listed, a destroyed one is still listed (as last seen), and updated
	// specs and added tags are listed as before, until ListLag has passed.
	ListLag time.Duration
	// DeclareListLag makes the engine declare ListLag as its bound
	// (lbrecon.ListLagger), as a provider documenting its consistency
	// does. With LagListings, whose lag has no time bound, it declares
	// no time but, without ListLag, LagListings as its bound in listings
	// (lbrecon.ListingLagger).
	DeclareListLag bool
	// ReplicaLag makes List answer from read replicas, as EC2/ELB,
	// OpenStack and regional caches do: each listing shows each object as
	// it was a lag ago, drawn afresh per object and per listing, uniform
	// in [0, ReplicaLag] from Seed, so a listing may miss what an earlier
	// one showed (a new object, a deletion, an update, a tag), and a
	// creation whose answer was lost (LoseCreateAnswers, FailCreateAfter)
	// shows later than the rest: its lag is drawn in [ReplicaLag/2,
	// ReplicaLag]. Every
	// listing that starts ReplicaLag after a change shows it. It replaces
	// ListLag and LagListings, which are then ignored by List.
	ReplicaLag time.Duration
	// Seed seeds the draws of ReplicaLag: one seed, one history.
	Seed uint64
	// Rate, when positive, puts the calls behind a token bucket, as EC2's
	// and ELB's request throttling does: Rate tokens a second, up to
	// Burst (at least 1); a call that finds the bucket empty fails at
	// once with a [RateLimitError] whose RetryAfter is the time to the
	// next token, and changes nothing. It counts as a call.
	Rate  float64
	Burst int
	// AssignVIP, when set, is called at every creation with the object
	// and the next free address of the provider's pool (198.51.100.1 and
	// up, never reused); when it answers ok, the status it returns is the
	// object's provider-assigned status ([lbrecon.Object.Status]), as a
	// provider assigns a load balancer's VIP: the creation's answer does
	// not show it; Get and listings show it from VIPDelay after the
	// object is ok (a listing as it lags). With LoadBalancerObjects and no
	// AssignVIP, every load-balancer object is assigned an
	// [lbrecon.LoadBalancerStatus] with the address and the DNS name
	// "<spec name>.lb.example".
	AssignVIP func(obj lbrecon.Object, vip netip.Addr) (status any, ok bool)
	// VIPDelay is how long after its pending period an object's assigned
	// status (AssignVIP) shows.
	VIPDelay time.Duration
	// LoadBalancerObjects models a provider with a load-balancer object
	// of its own ([lbrecon.KindLoadBalancer], created by a plan with
	// [lbrecon.LoadBalancer.Provision]): backends, frontends and listeners
	// refer to one by its ID (Refs, Scope), and it is assigned an address
	// (see AssignVIP). [ELB] and [HAProxy] set it.
	LoadBalancerObjects bool
	// Fence makes the provider check fencing tokens, as a conditional
	// write does: every write (Create, CreateIdempotent, Destroy, Tag,
	// Update, Repair) must carry one (lbrecon.WithToken), at least the
	// highest one a write carried before, when it takes effect (after
	// the latency); else it is refused with a permanent error wrapping
	// lbrecon.ErrNoToken or a *lbrecon.FenceError, and changes nothing.
	Fence bool
	// LagListings makes List lag by a number of listings rather than a
	// time: a created object is left out of the next LagListings List
	// calls (of any caller), on top of ListLag.
	LagListings int
	// DeleteDelay makes deletion asynchronous: a destroyed object still
	// exists (Get finds it, its name stays taken, it still counts as a
	// child) for DeleteDelay.
	DeleteDelay time.Duration
	// Integrity enforces references (see Refs): destroying an object that
	// existing objects refer to fails with lbrecon.ErrConflict
	// (ResourceInUse), and so does creating or updating an object that
	// refers to a missing or deleting one.
	Integrity bool
	// UniqueNames makes Create fail with lbrecon.ErrAlreadyExists when an
	// object of the kind with the name exists.
	UniqueNames bool
	// MaxNameLen, when positive, makes Create refuse longer names with a
	// permanent error.
	MaxNameLen int
	// Refs returns the keys an object refers to; nil means the
	// load-balancer plan's references (a frontend's backend, a bind's
	// frontend, a server's backend).
	Refs func(lbrecon.Object) []lbrecon.Key
	// Scope returns the scope of an untagged object, for List; nil means
	// the load-balancer plan's (the load balancer of a backend or frontend,
	// and of a bind's or server's parent). Untagged objects are listed only
	// within the queried scope.
	Scope func(e *Engine, o lbrecon.Object) string
	// Default, when set, fills fields the provider defaults: it is applied
	// to the spec of every created or updated object.
	Default func(spec any) any
	// IDsPerKind makes identifiers unique per kind only, as on providers
	// where a backend and a server can share an ID.
	IDsPerKind bool
	// Idempotency makes CreateIdempotent honour idempotency tokens (see
	// lbrecon.IdempotentCreator); without it, CreateIdempotent answers
	// lbrecon.ErrNotSupported.
	Idempotency bool
	// UniqueBinds makes Create and Update of a bind fail with
	// lbrecon.ErrConflict when another bind of the same load balancer (see
	// Scope) listens on the same address and port, as a provider refuses a
	// duplicate listener. A bind being deleted holds its address and port
	// until the deletion completes.
	UniqueBinds bool
}
