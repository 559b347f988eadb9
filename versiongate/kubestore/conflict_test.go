package kubestore_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// TestStatusWritesUnderConflicts holds the one bound of every write of
// the status Lease (Fence, WriteStatus, Uninstall) against both faces of
// a 409. A server that answers 409 to every update, with nothing
// changing, ends the call after three reads (at most six requests): the
// caller's backoff paces the next. A busy honest writer, whose write
// lands between each read and update of ours (eight times in a row here),
// is progress, not a fault: each read that finds a new resourceVersion
// starts the count again, and the call succeeds once the writer pauses.
// A raw count of conflicts fails the second case; no count at all fails
// the first.
func TestStatusWritesUnderConflicts(t *testing.T) {
	const interleaved = 8
	for _, op := range []struct {
		name string
		run  func(ctx context.Context, st *kubestore.Store) error
		// done checks the status Lease (nil if gone) after a success.
		done func(t *testing.T, l *coordinationv1.Lease)
	}{{
		name: "Fence",
		run: func(ctx context.Context, st *kubestore.Store) error {
			return st.Fence(ctx, versiongatetest.NewTerm("b", 12))
		},
		done: func(t *testing.T, l *coordinationv1.Lease) {
			require.NotNil(t, l)
			require.Equal(t, "12", l.Annotations[kubestore.AnnotationTerm])
		},
	}, {
		name: "WriteStatus",
		run: func(ctx context.Context, st *kubestore.Store) error {
			return st.WriteStatus(ctx, versiongatetest.NewTerm("a", 11), []byte("v"), 0)
		},
		done: func(t *testing.T, l *coordinationv1.Lease) {
			require.NotNil(t, l)
			require.Equal(t, b64("v"), l.Annotations[kubestore.AnnotationValue])
		},
	}, {
		name: "Uninstall",
		run:  func(ctx context.Context, st *kubestore.Store) error { return st.Uninstall(ctx) },
		done: func(t *testing.T, l *coordinationv1.Lease) {
			require.Nil(t, l, "the status Lease is still there")
		},
	}} {
		// setup returns a store on a fake server whose status Lease term
		// 11 fenced, the operator's client, and a count of the store's
		// requests about the status Lease.
		setup := func(t *testing.T) (*kubefake.Server, *kubefake.Client, *hooks, *kubestore.Store, func() int) {
			ctx := context.Background()
			srv := kubefake.Config{}.NewServer()
			op := srv.NewClient()
			require.NoError(t, newStore(t, op, "fleet", nil).Fence(ctx, versiongatetest.NewTerm("a", 11)))
			cl, h := wrap(srv.NewClient())
			var mu sync.Mutex
			n := 0
			count := func(name string) {
				if name == "fleet-status" {
					mu.Lock()
					n++
					mu.Unlock()
				}
			}
			h.set(func(h *hooks) {
				h.beforeGet = func(name string) error { count(name); return nil }
				h.beforeUpdate = func(l *coordinationv1.Lease) error { count(l.Name); return nil }
				h.beforeDelete = func(name string) error { count(name); return nil }
			})
			return srv, op, h, newStore(t, cl, "fleet", nil), func() int { mu.Lock(); defer mu.Unlock(); return n }
		}
		statusLease := func(t *testing.T, op *kubefake.Client) *coordinationv1.Lease {
			l, err := op.CoordinationV1().Leases(testNamespace).Get(context.Background(), "fleet-status", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			require.NoError(t, err)
			return l
		}

		t.Run(op.name+"/409 for ever", func(t *testing.T) {
			srv, _, h, st, sent := setup(t)
			srv.Inject(kubefake.Fault{Verb: "update", Resource: "leases", Name: "fleet-status", Answer: kubefake.Conflict()})
			// A call that spins is stopped on its count, not left to hang.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			h.set(func(h *hooks) {
				count := h.beforeGet
				h.beforeGet = func(name string) error {
					if sent() > 100 {
						cancel()
					}
					return count(name)
				}
			})
			err := op.run(ctx, st)
			t.Logf("%s under 409 for ever: %d requests, then %v", op.name, sent(), err)
			require.Error(t, err)
			require.LessOrEqual(t, sent(), 6, "requests of one call under 409 for ever")
		})

		t.Run(op.name+"/busy honest writer", func(t *testing.T) {
			_, opc, h, st, sent := setup(t)
			writes := 0
			h.set(func(h *hooks) {
				count := h.beforeUpdate
				h.beforeUpdate = func(l *coordinationv1.Lease) error {
					_ = count(l)
					if l.Name != "fleet-status" || writes == interleaved {
						return nil
					}
					// Another controller's write lands first: an edit of
					// an annotation of its own, read and written honestly.
					writes++
					cur := statusLease(t, opc)
					if cur.Annotations == nil {
						cur.Annotations = map[string]string{}
					}
					cur.Annotations["example.com/touched"] = strconv.Itoa(writes)
					_, err := opc.CoordinationV1().Leases(testNamespace).Update(context.Background(), cur, metav1.UpdateOptions{})
					require.NoError(t, err)
					return nil
				}
			})
			err := op.run(context.Background(), st)
			t.Logf("%s behind %d interleaved writes: %d requests, then %v", op.name, writes, sent(), err)
			require.NoError(t, err, "gave up while another writer progressed")
			require.Equal(t, interleaved, writes)
			op.done(t, statusLease(t, opc))
		})
	}
}

// TestKeepAliveUnderConflicts holds the same bound for a node's renewal
// of its heartbeat Lease: a server that answers 409 to every update ends
// the call after two conflicts that a read shows without progress (three
// requests), with the record lost, since the heartbeat can no longer be
// renewed; another controller that edits the heartbeat Lease (a label, an
// annotation) before each of five renewals in a row is progress, and
// never costs the node its record.
func TestKeepAliveUnderConflicts(t *testing.T) {
	setup := func(t *testing.T) (*kubefake.Server, *kubefake.Client, *hooks, *kubestore.Store, versiongate.RecordLease, func() int) {
		ctx := context.Background()
		srv := kubefake.Config{}.NewServer()
		cl, h := wrap(srv.NewClient())
		st := newStore(t, cl, "fleet", nil)
		l, err := st.PublishRecord(ctx, "a", mustNodeRecord(t, "a", "1.0.0"), 10*time.Second)
		require.NoError(t, err)
		var mu sync.Mutex
		n := 0
		count := func(name string) {
			if name == "fleet.a" {
				mu.Lock()
				n++
				mu.Unlock()
			}
		}
		h.set(func(h *hooks) {
			h.beforeGet = func(name string) error { count(name); return nil }
			h.beforeUpdate = func(l *coordinationv1.Lease) error { count(l.Name); return nil }
		})
		return srv, srv.NewClient(), h, st, l, func() int { mu.Lock(); defer mu.Unlock(); return n }
	}

	t.Run("409 for ever", func(t *testing.T) {
		srv, _, h, st, l, sent := setup(t)
		srv.Inject(kubefake.Fault{Verb: "update", Resource: "leases", Name: "fleet.a", Answer: kubefake.Conflict()})
		// A call that spins is stopped on its count, not left to hang.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		h.set(func(h *hooks) {
			count := h.beforeGet
			h.beforeGet = func(name string) error {
				if sent() > 100 {
					cancel()
				}
				return count(name)
			}
		})
		_, err := st.KeepAlive(ctx, l)
		t.Logf("KeepAlive under 409 for ever: %d requests, then %v", sent(), err)
		require.ErrorIs(t, err, versiongate.ErrRecordLost)
		require.LessOrEqual(t, sent(), 3)
	})

	t.Run("busy honest writer", func(t *testing.T) {
		const interleaved = 5
		_, op, h, st, l, sent := setup(t)
		writes := 0
		h.set(func(h *hooks) {
			count := h.beforeUpdate
			h.beforeUpdate = func(hb *coordinationv1.Lease) error {
				_ = count(hb)
				if hb.Name != "fleet.a" || writes == interleaved {
					return nil
				}
				writes++
				leases := op.CoordinationV1().Leases(testNamespace)
				cur, err := leases.Get(context.Background(), "fleet.a", metav1.GetOptions{})
				require.NoError(t, err)
				cur.Labels["example.com/touched"] = strconv.Itoa(writes)
				_, err = leases.Update(context.Background(), cur, metav1.UpdateOptions{})
				require.NoError(t, err)
				return nil
			}
		})
		ttl, err := st.KeepAlive(context.Background(), l)
		t.Logf("KeepAlive behind %d interleaved writes: %d requests, then %v", writes, sent(), err)
		require.NoError(t, err, "the record was lost to another writer's progress")
		require.Equal(t, 10*time.Second, ttl)
		require.Equal(t, interleaved, writes)
		// And the renewals after it need no read.
		before := sent()
		_, err = st.KeepAlive(context.Background(), l)
		require.NoError(t, err)
		require.Equal(t, 1, sent()-before)
	})
}
