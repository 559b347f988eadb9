package kubestore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// Joiners racing a restrict. The leader restricts the status with a write
// conditioned on its listing (WriteStatus with nodesRev); a joiner (an old
// release the restricted status does not admit) publishes its record and
// then reads the status. A violation is a round where the leader's write
// stands and the joiner read the status as it was before: the joiner
// serves while the status excludes it, and its record was missed.

const (
	open       = "open"
	restricted = "restricted"
)

// restrictRound is one leader and one joiner on a fresh gate whose status
// is open.
type restrictRound struct {
	leader, joiner *kubestore.Store
	lh             *hooks
	term           *versiongatetest.Term
	rev            int64
}

func newRound(t *testing.T, ctx context.Context, cs kubernetes.Interface, gate string) *restrictRound {
	t.Helper()
	lcs, lh := wrap(cs)
	r := &restrictRound{leader: newStore(t, lcs, gate, nil), joiner: newStore(t, cs, gate, nil), lh: lh, term: versiongatetest.NewTerm("leader", 3)}
	require.NoError(t, r.leader.Fence(ctx, r.term))
	require.NoError(t, r.leader.WriteStatus(ctx, r.term, []byte(open), 0))
	_, rev, err := r.leader.ListRecords(ctx)
	require.NoError(t, err)
	r.rev = rev
	return r
}

// join publishes the joiner's record, then reads the status; it returns
// what it read.
func (r *restrictRound) join(ctx context.Context) (string, error) {
	if _, err := r.joiner.PublishRecord(ctx, "joiner", []byte("1.0.0"), 10*time.Second); err != nil {
		return "", err
	}
	st, err := r.joiner.ReadStatus(ctx)
	return string(st.Value), err
}

// isValidation reports whether a LIST is the leader's validation (of the
// records, after its write).
func isRecordList(opts *metav1.ListOptions) bool { return opts.LabelSelector != "" }

func isRestrictWrite(l *coordinationv1.Lease) bool {
	return l.Annotations[kubestore.AnnotationValue] == b64(restricted) && l.Annotations[kubestore.AnnotationUnvalidated] != ""
}

// Deterministic interleavings on kubefake: the joiner runs entirely
// before the leader's write is applied, or between the write and the
// validating LIST. Either way the leader's write does not stand while
// the joiner read the open status.
func TestJoinerRacesRestrictInterleavings(t *testing.T) {
	for _, tc := range []struct {
		name string
		// hook installs the joiner at one point of the leader's write.
		hook func(r *restrictRound, join func())
		// wantWrite is whether the leader's write stands.
		wantStands bool
		wantSaw    string
	}{
		{"joiner before the write", func(r *restrictRound, join func()) {
			var once sync.Once
			r.lh.set(func(h *hooks) {
				h.beforeUpdate = func(l *coordinationv1.Lease) error {
					if isRestrictWrite(l) {
						once.Do(join)
					}
					return nil
				}
			})
		}, false, open},
		{"joiner between the write and the validating list", func(r *restrictRound, join func()) {
			var once sync.Once
			r.lh.set(func(h *hooks) {
				h.beforeList = func(opts *metav1.ListOptions) error {
					if isRecordList(opts) {
						once.Do(join)
					}
					return nil
				}
			})
		}, false, restricted},
		{"joiner after the validating list", nil, true, restricted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			cs := kubefake.NewClientset()
			r := newRound(t, ctx, cs, "join")
			var saw string
			var joinErr error
			join := func() { saw, joinErr = r.join(ctx) }
			if tc.hook != nil {
				tc.hook(r, join)
			}
			err := r.leader.WriteStatus(ctx, r.term, []byte(restricted), r.rev)
			if tc.hook == nil {
				join()
			}
			require.NoError(t, joinErr)
			require.Equal(t, tc.wantSaw, saw)
			st, rerr := r.joiner.ReadStatus(ctx)
			require.NoError(t, rerr)
			if tc.wantStands {
				require.NoError(t, err)
				require.Equal(t, restricted, string(st.Value))
			} else {
				require.ErrorIs(t, err, versiongate.ErrNodesChanged)
				require.Equal(t, open, string(st.Value), "the restricted write was reverted")
			}
		})
	}
}

// A cache in front of the LIST (what resourceVersion "0" or an informer
// reads) answers with the records as they were before the joiner: the
// store must not read from it. The LIST hook answers resourceVersion "0"
// from a snapshot taken at the start of the round, as a lagging watch
// cache would.
func TestJoinerRaceStaleCacheNotUsed(t *testing.T) {
	ctx := testCtx(t)
	cs := kubefake.NewClientset()
	r := newRound(t, ctx, cs, "join")
	snapshot, err := cs.CoordinationV1().Leases(testNamespace).List(ctx, metav1.ListOptions{LabelSelector: kubestore.LabelRole + "=" + kubestore.RoleRecord})
	require.NoError(t, err)
	var once sync.Once
	var saw string
	r.lh.set(func(h *hooks) {
		h.list = func(opts metav1.ListOptions) (*coordinationv1.LeaseList, bool) {
			if opts.ResourceVersion == "0" {
				return snapshot.DeepCopy(), true
			}
			return nil, false
		}
		h.beforeUpdate = func(l *coordinationv1.Lease) error {
			if isRestrictWrite(l) {
				once.Do(func() { saw, err = r.join(ctx) })
				require.NoError(t, err)
			}
			return nil
		}
	})
	werr := r.leader.WriteStatus(ctx, r.term, []byte(restricted), r.rev)
	require.Equal(t, open, saw)
	require.ErrorIs(t, werr, versiongate.ErrNodesChanged, "the joiner's record was missed: it serves on the open status while the restricted one stands")
}

// A cache in front of the status GET and LIST (what resourceVersion "0"
// reads) answers with the status as it was before the restrict: a joiner
// must not read from it, or it serves on the open status after the
// restricted one stands.
func TestStatusReadNotFromCache(t *testing.T) {
	ctx := testCtx(t)
	cs := kubefake.NewClientset()
	r := newRound(t, ctx, cs, "cached")
	before, err := cs.CoordinationV1().Leases(testNamespace).Get(ctx, "cached-status", metav1.GetOptions{})
	require.NoError(t, err)
	jcs, jh := wrap(cs)
	jh.set(func(h *hooks) {
		h.cachedGet = func(name string, opts metav1.GetOptions) (*coordinationv1.Lease, bool) {
			if opts.ResourceVersion == "0" {
				return before.DeepCopy(), true
			}
			return nil, false
		}
		h.list = func(opts metav1.ListOptions) (*coordinationv1.LeaseList, bool) {
			if opts.ResourceVersion == "0" {
				return &coordinationv1.LeaseList{ListMeta: metav1.ListMeta{ResourceVersion: before.ResourceVersion}, Items: []coordinationv1.Lease{*before.DeepCopy()}}, true
			}
			return nil, false
		}
	})
	joiner := newStore(t, jcs, "cached", nil)
	require.NoError(t, r.leader.WriteStatus(ctx, r.term, []byte(restricted), r.rev))
	st, err := joiner.ReadStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, restricted, string(st.Value), "the joiner read the status from a cache")
}

// Rounds of a real race on a real apiserver: the joiner and the leader
// start together; in a third of the rounds the leader's validating LIST
// is held until the joiner has published (injected LIST latency), widening
// the window in which a missed record would go unseen; in another third
// the joiner starts as the leader's write is sent.
func TestJoinersRaceRestrictAPIServer(t *testing.T) {
	cfg := apiServer(t)
	cs := clientFor(t, cfg)
	ctx := testCtx(t)
	const rounds = 45
	var stood, refused, sawOpen atomic.Int64
	for i := range rounds {
		r := newRound(t, ctx, cs, uniqueGate("jrace"))
		published := make(chan struct{})
		writing := make(chan struct{})
		var once sync.Once
		switch i % 3 {
		case 1:
			r.lh.set(func(h *hooks) {
				h.beforeList = func(opts *metav1.ListOptions) error {
					if isRecordList(opts) {
						select {
						case <-published:
						case <-ctx.Done():
						}
					}
					return nil
				}
			})
		case 2:
			// The joiner starts once the leader's write is on its way.
			r.lh.set(func(h *hooks) {
				h.beforeUpdate = func(l *coordinationv1.Lease) error {
					if isRestrictWrite(l) {
						once.Do(func() { close(writing) })
					}
					return nil
				}
			})
		}
		if i%3 != 2 {
			close(writing)
		}
		var wg sync.WaitGroup
		var saw string
		var joinErr, writeErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer close(published)
			select {
			case <-writing:
			case <-ctx.Done():
			}
			if _, joinErr = r.joiner.PublishRecord(ctx, "joiner", []byte("1.0.0"), 10*time.Second); joinErr != nil {
				return
			}
			var st versiongate.StoredStatus
			st, joinErr = r.joiner.ReadStatus(ctx)
			saw = string(st.Value)
		}()
		go func() {
			defer wg.Done()
			writeErr = r.leader.WriteStatus(ctx, r.term, []byte(restricted), r.rev)
		}()
		wg.Wait()
		require.NoError(t, joinErr)
		if writeErr == nil {
			stood.Add(1)
			require.NotEqual(t, open, saw, "round %d: the restricted status stands, the joiner read the open one and its record was missed", i)
		} else {
			require.ErrorIs(t, writeErr, versiongate.ErrNodesChanged)
			refused.Add(1)
		}
		if saw == open {
			sawOpen.Add(1)
		}
	}
	t.Logf("%d rounds: the restricted write stood in %d, was refused in %d; the joiner read the open status in %d; violations 0", rounds, stood.Load(), refused.Load(), sawOpen.Load())
}
