package ccm_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
)

// journalTransport counts the requests to configmaps by method, and runs
// before, when set, ahead of each PUT.
type journalTransport struct {
	rt     http.RoundTripper
	before func()
	n      map[string]*atomic.Int64
}

func (c journalTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.Contains(req.URL.Path, "/configmaps") {
		c.n[req.Method].Add(1)
		if req.Method == http.MethodPut && c.before != nil {
			c.before()
		}
	}
	return c.rt.RoundTrip(req)
}

// journalClient returns a clientset whose configmap requests are counted
// (by method) and preceded, for a PUT, by before().
func journalClient(t *testing.T, cfg *rest.Config, before func()) (kubernetes.Interface, map[string]*atomic.Int64) {
	t.Helper()
	n := map[string]*atomic.Int64{}
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		n[m] = new(atomic.Int64)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return journalTransport{rt: rt, before: before, n: n} }
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs, n
}

// On the real apiserver: a writer that changes the shard before each of
// our updates, ten times, delays the journal write without making it give
// up; an operator deleting the shards mid-term loses no held intent (the
// next write puts them back); a namespace being deleted refuses the write
// for good, with an ErrJournalRefused that says so, in a bounded number of
// requests.
func TestConfigMapJournalEditsOnTheRealAPIServer(t *testing.T) {
	a := testenv.APIServer(t)
	admin := kubernetes.NewForConfigOrDie(a.Config())
	ctx := t.Context()
	cms := admin.CoreV1().ConfigMaps("default")
	svc := createService(t, admin, "edits")
	busy := 0
	cs, n := journalClient(t, a.Config(), func() {
		if busy == 0 {
			return
		}
		busy--
		list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: ccm.JournalServiceLabel + "=" + string(svc.UID)})
		require.NoError(t, err)
		for _, cm := range list.Items {
			cm.Labels["other-writer"] = "x" + strings.Repeat("y", busy)
			_, err := cms.Update(ctx, &cm, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
	})
	scope := ccm.NewConfigMapJournal(cs.CoreV1(), ccm.ConfigMapJournalOptions{}).For(svc, "lb-1")
	stored := func() []lbrecon.Intent {
		got, err := ccm.NewConfigMapJournal(admin.CoreV1(), ccm.ConfigMapJournalOptions{}).For(svc, "lb-1").Load(ctx)
		require.NoError(t, err)
		return got
	}
	in := journalIntent
	require.NoError(t, scope.Record(ctx, []lbrecon.Intent{in("a")}))

	busy = 10
	puts := n[http.MethodPut].Load()
	require.NoError(t, scope.Record(ctx, []lbrecon.Intent{in("b")}), "a busy writer is progress")
	require.Zero(t, busy)
	require.EqualValues(t, 11, n[http.MethodPut].Load()-puts, "one update per conflict, one that lands")
	require.ElementsMatch(t, []lbrecon.Intent{in("a"), in("b")}, stored())

	deleteAll := func() {
		t.Helper()
		list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: ccm.JournalServiceLabel + "=" + string(svc.UID)})
		require.NoError(t, err)
		require.NotEmpty(t, list.Items)
		for _, cm := range list.Items {
			require.NoError(t, cms.Delete(ctx, cm.Name, metav1.DeleteOptions{}))
		}
	}
	deleteAll()
	before := n[http.MethodGet].Load() + n[http.MethodPost].Load() + n[http.MethodPut].Load() + n[http.MethodDelete].Load()
	require.NoError(t, scope.Record(ctx, []lbrecon.Intent{in("c")}))
	after := n[http.MethodGet].Load() + n[http.MethodPost].Load() + n[http.MethodPut].Load() + n[http.MethodDelete].Load()
	require.LessOrEqual(t, after-before, int64(3), "update (404), list, create")
	require.ElementsMatch(t, []lbrecon.Intent{in("a"), in("b"), in("c")}, stored(), "the held intents written again")
	deleteAll()
	got, err := scope.Load(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []lbrecon.Intent{in("a"), in("b"), in("c")}, got, "a new term's read returns what the process holds")
	require.NoError(t, scope.Forget(ctx, []lbrecon.Intent{in("a")}))
	require.ElementsMatch(t, []lbrecon.Intent{in("b"), in("c")}, stored())

	// A namespace being deleted (no namespace controller here: it stays
	// Terminating) refuses the journal's creations for good.
	ns, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "going"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	gsvc := service("")
	gsvc.Name, gsvc.Namespace, gsvc.UID = "svc", ns.Name, ""
	for i := range gsvc.Spec.Ports {
		gsvc.Spec.Ports[i].NodePort = 0
	}
	gsvc, err = admin.CoreV1().Services(ns.Name).Create(ctx, gsvc, metav1.CreateOptions{})
	require.NoError(t, err)
	gscope := ccm.NewConfigMapJournal(cs.CoreV1(), ccm.ConfigMapJournalOptions{}).For(gsvc, "lb-1")
	require.NoError(t, gscope.Record(ctx, []lbrecon.Intent{in("a")}))
	require.NoError(t, admin.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}))
	before = n[http.MethodGet].Load() + n[http.MethodPost].Load() + n[http.MethodPut].Load() + n[http.MethodDelete].Load()
	err = gscope.Record(ctx, []lbrecon.Intent{in("b")})
	after = n[http.MethodGet].Load() + n[http.MethodPost].Load() + n[http.MethodPut].Load() + n[http.MethodDelete].Load()
	if err != nil { // an update of an existing shard is allowed in a terminating namespace
		require.ErrorIs(t, err, ccm.ErrJournalRefused)
		require.True(t, backoff.IsPermanent(err))
	}
	require.LessOrEqual(t, after-before, int64(3))
	_, err = admin.CoreV1().ConfigMaps(ns.Name).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "the namespace refuses creations: %v", err)
	// Its shard deleted too: the held intents cannot be written again,
	// and the refusal is permanent, said once, not retried.
	list, err := admin.CoreV1().ConfigMaps(ns.Name).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, cm := range list.Items {
		require.NoError(t, admin.CoreV1().ConfigMaps(ns.Name).Delete(ctx, cm.Name, metav1.DeleteOptions{}))
	}
	before = n[http.MethodGet].Load() + n[http.MethodPost].Load() + n[http.MethodPut].Load() + n[http.MethodDelete].Load()
	err = gscope.Record(ctx, []lbrecon.Intent{in("c")})
	after = n[http.MethodGet].Load() + n[http.MethodPost].Load() + n[http.MethodPut].Load() + n[http.MethodDelete].Load()
	require.ErrorIs(t, err, ccm.ErrJournalRefused)
	require.True(t, backoff.IsPermanent(err))
	require.Contains(t, err.Error(), "namespace is being deleted")
	require.LessOrEqual(t, after-before, int64(3), "update (404), list, create (403)")
}
