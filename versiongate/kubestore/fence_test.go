package kubestore_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// A deposed leader's status write is refused by the apiserver, not by the
// store's own check: the deposed store reads the status while its term
// still holds the fence, the next leader fences in between, and the
// deposed store's update, carrying the resourceVersion it read, gets 409.
func TestDeposedWriteRefusedByServer(t *testing.T) {
	cfg := apiServer(t)
	cs := clientFor(t, cfg)
	ctx := testCtx(t)
	gate := uniqueGate("fence")
	dcs, dh := wrap(cs)
	deposed := newStore(t, dcs, gate, nil)
	next := newStore(t, cs, gate, nil)
	t5, t6 := versiongatetest.NewTerm("deposed", 5), versiongatetest.NewTerm("next", 6)
	require.NoError(t, deposed.Fence(ctx, t5))
	require.NoError(t, deposed.WriteStatus(ctx, t5, []byte("by 5"), 0))

	var fenced atomic.Bool
	var sent atomic.Int64
	dh.set(func(h *hooks) {
		h.afterGet = func(name string, l *coordinationv1.Lease) {
			if name == gate+"-status" && fenced.CompareAndSwap(false, true) {
				require.Equal(t, "5", l.Annotations[kubestore.AnnotationTerm], "the deposed store read its own fence")
				require.NoError(t, next.Fence(ctx, t6))
			}
		}
		h.beforeUpdate = func(l *coordinationv1.Lease) error {
			if l.Name == gate+"-status" {
				sent.Add(1)
			}
			return nil
		}
	})
	err := deposed.WriteStatus(ctx, t5, []byte("late by 5"), 0)
	require.ErrorIs(t, err, versiongate.ErrLeadershipLost)
	var fe *versiongate.FencedOffError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, uint64(6), fe.Stored)
	require.Equal(t, int64(1), sent.Load(), "the deposed write reached the server, which refused it")
	st, err := next.ReadStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, "by 5", string(st.Value))
}

// Two leaders race: one writes the status in a loop while the other
// fences with a higher token. On the status Lease's own history, no write
// of the lower term follows the higher term's fence.
func TestTwoLeadersRaceTheFence(t *testing.T) {
	cfg := apiServer(t)
	cs := clientFor(t, cfg)
	ctx := testCtx(t)
	for round := range 10 {
		gate := uniqueGate("race")
		a, b := newStore(t, cs, gate, nil), newStore(t, cs, gate, nil)
		ta, tb := versiongatetest.NewTerm("a", uint64(10+2*round)), versiongatetest.NewTerm("b", uint64(11+2*round))
		require.NoError(t, a.Fence(ctx, ta))
		require.NoError(t, a.WriteStatus(ctx, ta, []byte("a-0"), 0))
		l, err := cs.CoordinationV1().Leases(testNamespace).Get(ctx, gate+"-status", metav1.GetOptions{})
		require.NoError(t, err)
		w, err := cs.CoordinationV1().Leases(testNamespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + gate + "-status", ResourceVersion: l.ResourceVersion})
		require.NoError(t, err)

		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 1; ; i++ {
				if err := a.WriteStatus(ctx, ta, fmt.Appendf(nil, "a-%d", i), 0); err != nil {
					assert.ErrorIs(t, err, versiongate.ErrLeadershipLost)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			if assert.NoError(t, b.Fence(ctx, tb)) {
				assert.NoError(t, b.WriteStatus(ctx, tb, []byte("b"), 0))
			}
		}()
		wg.Wait()

		followFence(t, cs, gate, w, tb, round)
		w.Stop()
	}
}

// followFence follows the status Lease's history on w up to its version
// once both leaders returned: after the event that raised the term to b's
// token, only b writes.
func followFence(t *testing.T, cs kubernetes.Interface, gate string, w watch.Interface, tb versiongate.Term, round int) {
	t.Helper()
	end, err := cs.CoordinationV1().Leases(testNamespace).Get(testCtx(t), gate+"-status", metav1.GetOptions{})
	require.NoError(t, err)
	fencedAt := ""
	for ev := range w.ResultChan() {
		require.NotEqual(t, watch.Error, ev.Type)
		l := ev.Object.(*coordinationv1.Lease)
		v := l.Annotations[kubestore.AnnotationValue]
		if fencedAt == "" && l.Annotations[kubestore.AnnotationTerm] == fmt.Sprint(tb.Token()) {
			fencedAt = l.ResourceVersion
		}
		if fencedAt != "" {
			require.False(t, strings.HasPrefix(decode(t, v), "a-") && l.ResourceVersion != fencedAt,
				"round %d: a's write %q landed at %s, after b fenced at %s", round, decode(t, v), l.ResourceVersion, fencedAt)
		}
		if l.ResourceVersion == end.ResourceVersion {
			break
		}
	}
}

func decode(t *testing.T, v string) string {
	t.Helper()
	b, err := base64Decode(v)
	require.NoError(t, err)
	return string(b)
}
