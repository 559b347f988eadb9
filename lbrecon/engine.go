package lbrecon

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Errors an [Engine] returns so the reconciler can branch on them.
var (
	// ErrNotFound is wrapped by an engine when the object does not exist.
	// Destroy treats it as success, Get as "the object is gone", and List as
	// "nothing matched" (some providers answer an empty tag query with an
	// error; the engine wraps that error with ErrNotFound).
	ErrNotFound = errors.New("lbrecon: not found")

	// ErrNotSupported is wrapped by an optional engine method (such as
	// [Repairer.Repair]) that the provider cannot perform. It is an answer,
	// not a failure: the reconciler falls back (Repair to recreation) and
	// does not log it as an error.
	ErrNotSupported = errors.New("lbrecon: not supported by engine")

	// ErrAlreadyExists is wrapped by Create when the provider refuses a
	// name that is taken. The reconciler does not retry the call: it looks
	// again (lists) on its next pass.
	ErrAlreadyExists = errors.New("lbrecon: already exists")

	// ErrConflict is wrapped by an engine when a call conflicts with the
	// object's current state: a parent still referenced by children
	// (ResourceInUse), a parent that does not exist yet, a concurrent
	// change. The reconciler does not retry the call: it looks again on its
	// next pass.
	ErrConflict = errors.New("lbrecon: conflict with current state")
)

// Key identifies one provider object: identifiers are unique per kind only.
type Key struct {
	Kind string
	ID   string
}

// String returns "kind(id)".
func (k Key) String() string { return k.Kind + "(" + k.ID + ")" }

// State is the provisioning state an object reports.
type State int

// States an object can report. The zero value is not a valid state; the
// reconciler treats it like [StatePending] and polls until the engine reports
// one of the others.
const (
	// StatePending means the provider is still working on the object.
	StatePending State = iota + 1
	// StateOK means the object is provisioned and in use.
	StateOK
	// StateFailed means the provider gave up provisioning the object.
	StateFailed
)

// String returns "pending", "ok", "failed" or "unknown".
func (s State) String() string {
	switch s {
	case StatePending:
		return "pending"
	case StateOK:
		return "ok"
	case StateFailed:
		return "failed"
	}
	return "unknown"
}

// Object is one provider resource, as desired by a [Step] or as observed
// through an [Engine]. It is a plain value: the reconciler and the engine
// exchange copies and never share the Tags slice or the Spec's insides.
type Object struct {
	// Kind is the resource type, such as [KindBackend]. One [Step] manages
	// one kind.
	Kind string
	// ID is the provider's identifier; empty for a desired object not yet
	// created.
	ID string
	// Name is unique per kind among the objects one reconciler manages; steps
	// match desired and observed objects by it.
	Name string
	// Tags are "key=value" strings. The reconciler owns an object when Tags
	// holds its [Config.Tag].
	Tags []string
	// State is the provisioning state (observed objects only).
	State State
	// Spec is the provider-specific description the engine creates the
	// object from, for example [BackendSpec]. Two objects with equal names
	// and equal specs (==, or reflect.DeepEqual for values that are not
	// comparable) are the same resource.
	Spec any
	// Status holds what the provider assigns to an object and reports
	// back (observed objects only), such as a load balancer's address
	// ([LoadBalancerStatus]); nil while it has assigned nothing. It is
	// not part of the desired state: comparisons, [SpecFingerprint],
	// adoption and the journal ignore it, so an assigned attribute
	// never makes an object differ from its desired version. Steps read
	// it from the [Observation] to plan the objects that need it.
	Status any
}

// String returns "kind/name(id)", for logs and errors.
func (o Object) String() string {
	if o.ID == "" {
		return o.Kind + "/" + o.Name
	}
	return fmt.Sprintf("%s/%s(%s)", o.Kind, o.Name, o.ID)
}

// Key returns o's kind and ID.
func (o Object) Key() Key { return Key{Kind: o.Kind, ID: o.ID} }

// HasTag reports whether o carries tag.
func (o Object) HasTag(tag string) bool { return slices.Contains(o.Tags, tag) }

// clone returns a copy of o that shares no slice with it.
func (o Object) clone() Object {
	o.Tags = slices.Clone(o.Tags)
	return o
}

// SameSpec reports whether a and b are equal specs: with == when their
// dynamic type is comparable, with reflect.DeepEqual otherwise.
func SameSpec(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb {
		return false
	}
	if ta.Comparable() {
		return a == b
	}
	return reflect.DeepEqual(a, b)
}

// tagKey returns the part of a "key=value" tag before '='.
func tagKey(tag string) string {
	k, _, _ := strings.Cut(tag, "=")
	return k
}

// Query selects what [Engine.List] returns.
type Query struct {
	// Tag is the ownership tag: every object carrying it is returned.
	Tag string
	// Scope names the container the reconciler works in (for the
	// load-balancer plan, the load balancer's identifier). Engines also
	// return the untagged objects they find in the scope, so that an object
	// created just before a crash, and never tagged, is found again. The
	// reconciler changes only objects that carry Tag; it adopts (tags) an
	// untagged object only when its kind, name and spec are exactly those of
	// an object it is about to create, and it never destroys an untagged
	// object. Objects of other owners are ignored.
	Scope string
}

// Engine is the reconciler's access to the provider's API. Its methods may be
// called concurrently (up to [Config.Parallelism] calls at once) and must
// honour their context.
//
// Errors: wrap [ErrNotFound] for missing objects; mark errors that retrying
// cannot fix with backoff.Permanent (any error whose chain holds a
// *github.com/cenkalti/backoff/v4.PermanentError); give rate-limit answers a
// RetryAfter() time.Duration method (backoff.RetryAfter builds one). Every
// other error is treated as transient and retried a few times.
type Engine interface {
	// List returns, in one call, every object carrying q.Tag, with its
	// current state, tags and spec (see [Query] for untagged objects).
	List(ctx context.Context, q Query) ([]Object, error)
	// Get returns the current version of the object with obj's Kind and ID.
	Get(ctx context.Context, obj Object) (Object, error)
	// Create creates obj with obj.Tags applied as part of creation and
	// returns it with its ID and state. A provider that needs a separate
	// tagging call makes it inside Create; if Create fails between the two,
	// the object stays untagged and is found again through [Query.Scope].
	Create(ctx context.Context, obj Object) (Object, error)
	// Destroy removes the object with obj's Kind and ID. A missing object is
	// not an error (or wraps ErrNotFound, which the reconciler ignores).
	Destroy(ctx context.Context, obj Object) error
	// Tag adds tags to the object with obj's Kind and ID. The reconciler
	// uses it to adopt untagged objects it created before a crash. An engine
	// whose provider needs tagging serialised serialises it here.
	Tag(ctx context.Context, obj Object, tags []string) error
}

// Updater is implemented by engines that can change some fields of an
// object in place. The reconciler calls Update for each [Changes.Update] a
// step returns (an observed object its [Compare] found [Updatable]),
// instead of creating a replacement and destroying the old object.
type Updater interface {
	// Update changes the object with current's Kind and ID to desired's
	// spec and returns its new version (possibly pending). It returns an
	// error wrapping [ErrNotSupported] when this change cannot be made in
	// place; the reconciler then replaces the object.
	Update(ctx context.Context, current, desired Object) (Object, error)
}

// IdempotentCreator is implemented by engines whose provider takes an
// idempotency token with a creation (a client token, a request ID): a
// second creation with the same token creates nothing and answers with
// the object the first one created. The reconciler then calls
// CreateIdempotent instead of Create, with a token recorded in its intent
// (and [Journal]) before the call, and sends a creation of unknown outcome
// again with the same token instead of holding its name until a listing
// shows it.
type IdempotentCreator interface {
	// CreateIdempotent creates obj as Create does, unless a creation with
	// token was made already: then it returns that creation's object (as
	// Get would) and creates nothing. It returns an error wrapping
	// [ErrNotSupported], having sent nothing, when the provider takes no
	// token; the reconciler then uses Create.
	CreateIdempotent(ctx context.Context, obj Object, token string) (Object, error)
}

// ListLagger is implemented by engines whose provider declares how far its
// listings may lag behind its writes. [New] takes the declared lag as
// [Config.ListLag] when that is zero, so that a creation of unknown
// outcome holds its name only until a listing made that long after the
// call, instead of ConfirmTimeout.
type ListLagger interface {
	// ListLag returns the bound: every listing that starts ListLag after
	// a call returned reflects it. Zero means the provider declares
	// none.
	ListLag() time.Duration
}

// ListingLagger is implemented by engines whose provider declares its
// listing lag as a number of listings rather than a time. [New] takes the
// declared count as [Config.ListLagListings] when that is zero.
type ListingLagger interface {
	// ListLagListings returns the bound: of the listings that start after
	// a call returned, the (ListLagListings+1)-th and every later one
	// reflects it, whoever made the earlier ones. Zero means the provider
	// declares none.
	ListLagListings() int
}

// Repairer is implemented by engines that can retry a failed object in place
// (for example by applying its spec again). The reconciler tries Repair once
// before it destroys and recreates a failed object.
type Repairer interface {
	// Repair asks the provider to provision obj again and returns its new
	// version (normally pending). It returns an error wrapping
	// [ErrNotSupported] when this object cannot be repaired in place.
	Repair(ctx context.Context, obj Object) (Object, error)
}
