package lease

import (
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/election"
)

// leaseRecord is the leader election record that client-go's LeaseLock
// keeps in a Lease spec, field for field.
type leaseRecord struct {
	Holder          string
	DurationSeconds int32
	AcquireTime     time.Time
	RenewTime       time.Time
	Transitions     int32
	// Epoch is the Lease's creationTimestamp in Unix seconds (0 when
	// unknown, as on client-go's fake clientset): not part of the spec,
	// it is read from the object's metadata by recordFromLease.
	Epoch           int64
	PreferredHolder string
	Strategy        string
}

// recordFromLease is recordFromSpec of l's spec with l's epoch.
func recordFromLease(l *coordinationv1.Lease) leaseRecord {
	r := recordFromSpec(&l.Spec)
	r.Epoch = l.CreationTimestamp.Unix()
	if l.CreationTimestamp.IsZero() {
		r.Epoch = 0
	}
	return r
}

// recordFromSpec reads the record from a Lease spec the way client-go's
// LeaseSpecToLeaderElectionRecord does: absent fields read as zero.
func recordFromSpec(spec *coordinationv1.LeaseSpec) leaseRecord {
	var r leaseRecord
	if spec.HolderIdentity != nil {
		r.Holder = *spec.HolderIdentity
	}
	if spec.LeaseDurationSeconds != nil {
		r.DurationSeconds = *spec.LeaseDurationSeconds
	}
	if spec.AcquireTime != nil {
		r.AcquireTime = spec.AcquireTime.Time
	}
	if spec.RenewTime != nil {
		r.RenewTime = spec.RenewTime.Time
	}
	if spec.LeaseTransitions != nil {
		r.Transitions = *spec.LeaseTransitions
	}
	if spec.PreferredHolder != nil {
		r.PreferredHolder = *spec.PreferredHolder
	}
	if spec.Strategy != nil {
		r.Strategy = string(*spec.Strategy)
	}
	return r
}

// spec writes the record as client-go's LeaderElectionRecordToLeaseSpec
// does: the five election fields always set, the coordinated-election
// fields only when non-empty.
func (r leaseRecord) spec() coordinationv1.LeaseSpec {
	holder, dur, trans := r.Holder, r.DurationSeconds, r.Transitions
	s := coordinationv1.LeaseSpec{
		HolderIdentity:       &holder,
		LeaseDurationSeconds: &dur,
		AcquireTime:          &metav1.MicroTime{Time: r.AcquireTime},
		RenewTime:            &metav1.MicroTime{Time: r.RenewTime},
		LeaseTransitions:     &trans,
	}
	if r.PreferredHolder != "" {
		p := r.PreferredHolder
		s.PreferredHolder = &p
	}
	if r.Strategy != "" {
		st := coordinationv1.CoordinatedLeaseStrategy(r.Strategy)
		s.Strategy = &st
	}
	return s
}

// equal reports whether two records are the same, to the precision the
// Lease stores (microseconds).
func (r leaseRecord) equal(o leaseRecord) bool {
	return r.Holder == o.Holder && r.DurationSeconds == o.DurationSeconds &&
		r.AcquireTime.Equal(o.AcquireTime) && r.RenewTime.Equal(o.RenewTime) &&
		r.Transitions == o.Transitions && r.PreferredHolder == o.PreferredHolder &&
		r.Strategy == o.Strategy
}

// duration is the lease duration the record announces; a negative value
// counts as zero (the lease is expired as soon as it is seen).
func (r leaseRecord) duration() time.Duration {
	if r.DurationSeconds <= 0 {
		return 0
	}
	return time.Duration(r.DurationSeconds) * time.Second
}

// token is the fencing token of the term the record describes: the
// Lease's epoch (its creationTimestamp in Unix seconds, written by the
// apiserver) in the high 32 bits and leaseTransitions + 1 in the low 32.
// A Lease deleted and created again starts its transitions anew, in the
// same second or a later one; in the same second, our candidates go on
// counting from the highest token they saw (see the package doc for what
// this rests on).
func (r leaseRecord) token() election.Token {
	low := election.Token(1)
	if r.Transitions > 0 {
		low = election.Token(r.Transitions) + 1 // at most 2^31: fits in 32 bits
	}
	return election.Token(max(r.Epoch, 0))<<32 | low
}

// clientGoKey is what a client-go LeaderElector compares to decide whether
// the record changed: it compares the JSON of its LeaderElectionRecord,
// whose times are metav1.Time and so encoded in whole seconds. Two of our
// renewals within one second look like no change to a client-go follower,
// which keeps timing the lease from the first of them. The leader therefore
// times its own validity from the first write with the current key.
type clientGoKey struct {
	holder          string
	durationSeconds int32
	acquire, renew  int64 // Unix seconds; zero time kept apart by the flags
	acquireZero     bool
	renewZero       bool
	transitions     int32
	preferredHolder string
	strategy        string
}

func (r leaseRecord) clientGoKey() clientGoKey {
	return clientGoKey{
		holder:          r.Holder,
		durationSeconds: r.DurationSeconds,
		acquire:         r.AcquireTime.Unix(),
		renew:           r.RenewTime.Unix(),
		acquireZero:     r.AcquireTime.IsZero(),
		renewZero:       r.RenewTime.IsZero(),
		transitions:     r.Transitions,
		preferredHolder: r.PreferredHolder,
		strategy:        r.Strategy,
	}
}

// observation is what a candidate knows of the Lease: its newest state and
// the local instant that state was first seen. Expiry is judged from that
// instant, never from the timestamps in the record, which another host's
// clock wrote (client-go does the same, which is what makes a mixed fleet
// agree).
type observation struct {
	lease *coordinationv1.Lease // nil when the Lease does not exist; never modified
	rv    string                // resourceVersion of lease, or of the list that found none
	rec   leaseRecord
	at    time.Time // local clock when rec was first seen
	known bool      // false until the first read
	// margin is Config.TakeoverMargin, added to the holder's lease
	// duration before this candidate counts the lease as expired.
	margin time.Duration
}

// expiry is the local instant from which the lease may be taken: the
// holder's leaseDurationSeconds after the record was first seen, plus the
// takeover margin.
func (o observation) expiry() time.Time { return o.at.Add(o.rec.duration() + o.margin) }

// held reports whether somebody holds the lease at now, by client-go's
// rule: a holder is named and observedTime + leaseDuration is after now.
func (o observation) held(now time.Time) bool {
	return o.lease != nil && o.rec.Holder != "" && o.expiry().After(now)
}

// leader is the election.LeaderInfo the observation implies at now.
func (o observation) leader(now time.Time) election.LeaderInfo {
	if !o.held(now) {
		return election.LeaderInfo{}
	}
	return election.LeaderInfo{Identity: o.rec.Holder, Token: o.rec.token()}
}

// olderRV reports whether resourceVersion a is known to be older than b.
// resourceVersions are opaque to clients in general; the apiserver on etcd
// issues them as increasing integers, and anything else is treated as not
// older, which only makes a stale event count as a change (a later expiry,
// never an earlier one).
func olderRV(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}
