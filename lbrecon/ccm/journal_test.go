package ccm_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/cloud-provider/api"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// scaleIntents returns the intents of a whole load balancer of a Service
// with ports ports on nodes nodes, as lbrecon records them.
func scaleIntents(uid string, nodes, ports int) []lbrecon.Intent {
	at := time.Date(2030, 1, 1, 0, 0, 0, 123456789, time.UTC)
	var out []lbrecon.Intent
	add := func(kind, name string, spec any) {
		out = append(out, lbrecon.Intent{Kind: kind, Name: name, Spec: lbrecon.SpecFingerprint(spec),
			Token: fmt.Sprintf("%032x", len(out)), At: at})
	}
	for p := range ports {
		port := fmt.Sprintf("port-%d", p)
		add(lbrecon.KindBackend, port+"."+uid, lbrecon.BackendSpec{LoadBalancer: "lb-1"})
		add(lbrecon.KindFrontend, port+"."+uid, lbrecon.FrontendSpec{LoadBalancer: "lb-1", DefaultBackend: "backend-0123456789"})
		add(lbrecon.KindBind, "192.0.2.10."+port+"."+uid, lbrecon.BindSpec{Frontend: "frontend-0123456789", Address: netip.MustParseAddr("192.0.2.10"), Port: 443})
		for n := range nodes {
			add(lbrecon.KindServer, fmt.Sprintf("node-%05d.%s.%s", n, port, uid), lbrecon.ServerSpec{Backend: "backend-0123456789",
				Address: netip.AddrFrom4([4]byte{10, byte(n >> 16), byte(n >> 8), byte(n)}), Port: 30000 + uint16(p)})
		}
	}
	return out
}

// sorted returns intents sorted by kind and name (ElementsMatch is
// quadratic).
func sorted(intents []lbrecon.Intent) []lbrecon.Intent {
	out := slices.Clone(intents)
	slices.SortFunc(out, func(a, b lbrecon.Intent) int {
		return strings.Compare(a.Kind+"/"+a.Name, b.Kind+"/"+b.Name)
	})
	return out
}

func journalService(uid string) *v1.Service {
	svc := service(uid)
	svc.Namespace = "default"
	return svc
}

func shards(t *testing.T, cs interface {
	Tracker() k8stesting.ObjectTracker
}) []v1.ConfigMap {
	t.Helper()
	obj, err := cs.Tracker().List(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "default")
	require.NoError(t, err)
	return obj.(*v1.ConfigMapList).Items
}

// A 5,000-node Service with 4 ports: every intent of a whole load balancer
// in flight at once fits, in shards each under the bound (and so under the
// apiserver's 1 MiB), read back whole by another process, and gone once
// forgotten. The Service is never written.
func TestConfigMapJournalFitsA5000NodeService(t *testing.T) {
	cs := kubefake.NewClientset()
	svc := journalService("0b5ad3c4-5f52-4cf0-9b43-8d5e0c1f7a21")
	j := ccm.NewConfigMapJournal(cs.CoreV1(), ccm.ConfigMapJournalOptions{})
	scope := j.For(svc, "lb-1")
	intents := scaleIntents(string(svc.UID), 5000, 4)
	require.NoError(t, scope.Record(t.Context(), intents))
	got := shards(t, cs)
	require.Greater(t, len(got), 1)
	total := 0
	for _, cm := range got {
		size := len(cm.Data["intents"])
		total += size
		require.LessOrEqual(t, size, ccm.DefaultShardBytes, "shard %s", cm.Name)
		require.Equal(t, []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "web", UID: svc.UID, Controller: new(bool)}},
			cm.OwnerReferences, "owned by the Service, for the garbage collector")
	}
	t.Logf("%d intents: %d shards, %d KiB", len(intents), len(got), total>>10)

	loaded, err := j.For(svc, "lb-1").Load(t.Context())
	require.NoError(t, err)
	require.Equal(t, sorted(intents), sorted(loaded), "read back whole by another process")
	scopes, err := j.Scopes(t.Context(), svc)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"lb-1": len(intents)}, scopes)

	require.NoError(t, scope.Forget(t.Context(), intents[:len(intents)/2]))
	loaded, err = j.For(svc, "lb-1").Load(t.Context())
	require.NoError(t, err)
	require.Equal(t, sorted(intents[len(intents)/2:]), sorted(loaded))
	require.NoError(t, scope.Forget(t.Context(), intents))
	require.Empty(t, shards(t, cs), "emptied shards are deleted")
	for _, a := range cs.Actions() {
		require.NotEqual(t, "services", a.GetResource().Resource, "the Service is never read or written: %v", a)
	}
}

// Two load-balancer IDs of one Service (a move) keep separate entries:
// forgetting one's intent leaves the other's of the same kind and name.
func TestConfigMapJournalScopesDoNotShare(t *testing.T) {
	cs := kubefake.NewClientset()
	svc := journalService("uid-1")
	j := ccm.NewConfigMapJournal(cs.CoreV1(), ccm.ConfigMapJournalOptions{})
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	in := lbrecon.Intent{Kind: "backend", Name: "http.uid-1", Spec: "s", Token: "t", At: at}
	require.NoError(t, j.For(svc, "lb-1").Record(t.Context(), []lbrecon.Intent{in}))
	require.NoError(t, j.For(svc, "lb-2").Record(t.Context(), []lbrecon.Intent{in}))
	require.NoError(t, j.For(svc, "lb-1").Forget(t.Context(), []lbrecon.Intent{in}))
	got, err := j.For(svc, "lb-2").Load(t.Context())
	require.NoError(t, err)
	require.Equal(t, []lbrecon.Intent{in}, got)
	scopes, err := j.Scopes(t.Context(), svc)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"lb-2": 1}, scopes)
	other, err := j.Scopes(t.Context(), journalService("uid-2"))
	require.NoError(t, err)
	require.Empty(t, other, "another Service's journal")
}

// A write from a stale read is refused by its resourceVersion
// precondition, read again and retried: another writer's intents are kept.
func TestConfigMapJournalKeepsAConcurrentWritersIntents(t *testing.T) {
	cs := kubefake.NewClientset()
	svc := journalService("uid-1")
	j := ccm.NewConfigMapJournal(cs.CoreV1(), ccm.ConfigMapJournalOptions{})
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	a, b := j.For(svc, "lb-1"), j.For(svc, "lb-1")
	in := func(name string) lbrecon.Intent {
		return lbrecon.Intent{Kind: "server", Name: name, Spec: "s", Token: "t", At: at}
	}
	require.NoError(t, a.Record(t.Context(), []lbrecon.Intent{in("a1")}))
	_, err := b.Load(t.Context())
	require.NoError(t, err)
	require.NoError(t, a.Record(t.Context(), []lbrecon.Intent{in("a2")}))
	require.NoError(t, b.Record(t.Context(), []lbrecon.Intent{in("b1")}), "stale, refused, read again")
	require.NoError(t, a.Forget(t.Context(), []lbrecon.Intent{in("a1")}))
	got, err := j.For(svc, "lb-1").Load(t.Context())
	require.NoError(t, err)
	require.ElementsMatch(t, []lbrecon.Intent{in("a2"), in("b1")}, got)
}

// The apiserver refusing a shard (422 Invalid, 403 Forbidden) is a
// permanent ErrJournalRefused error that says what to do; through the
// Balancer it is a plain error (the service controller's backoff), never a
// RetryError, and no creation is sent.
func TestConfigMapJournalRefusalIsPermanent(t *testing.T) {
	for name, answer := range map[string]error{
		"invalid": apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "x",
			field.ErrorList{field.TooLong(field.NewPath("data"), "", 1<<20)}),
		"forbidden": apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "x", fmt.Errorf("RBAC")),
	} {
		t.Run(name, func(t *testing.T) {
			cs := kubefake.NewClientset()
			cs.PrependReactor("create", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, answer
			})
			svc := journalService("uid-1")
			j := ccm.NewConfigMapJournal(cs.CoreV1(), ccm.ConfigMapJournalOptions{})
			err := j.For(svc, "lb-1").Record(t.Context(), scaleIntents("uid-1", 1, 1))
			require.ErrorIs(t, err, ccm.ErrJournalRefused)
			require.True(t, backoff.IsPermanent(err))
			want := map[string]string{"invalid": "ShardBytes", "forbidden": "grant the cloud-controller-manager"}[name]
			require.Contains(t, err.Error(), want)

			eng := newEngine()
			bal := newBalancer(t, eng, func(c *ccm.Config) { c.Journal = j })
			_, err = bal.EnsureLoadBalancer(context.Background(), "c", svc, nodes(1))
			require.ErrorIs(t, err, ccm.ErrJournalRefused)
			require.False(t, isRetry(err), "not a RetryError: %v", err)
			require.Zero(t, eng.Calls()[lbrecon.VerbCreate], "nothing sent that a successor could not recognise")
		})
	}
}

// A shard that is not a journal is an ErrCorruptJournal error naming it;
// nothing is lost or overwritten.
func TestConfigMapJournalCorruptShard(t *testing.T) {
	for name, data := range map[string]string{
		"not JSON":        "{garbage",
		"another version": `{"version":2,"intents":[]}`,
		"no name":         `{"version":1,"intents":[{"kind":"backend","at":"2030-01-01T00:00:00Z"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			cs := kubefake.NewClientset(corruptShard(t, "uid-1", data))
			j := ccm.NewConfigMapJournal(cs.CoreV1(), ccm.ConfigMapJournalOptions{})
			_, err := j.For(journalService("uid-1"), "lb-1").Load(t.Context())
			require.ErrorIs(t, err, lbrecon.ErrCorruptJournal)
			require.Contains(t, err.Error(), "default/bad")
			_, err = j.Scopes(t.Context(), journalService("uid-1"))
			require.ErrorIs(t, err, lbrecon.ErrCorruptJournal)
			require.Equal(t, data, shards(t, cs)[0].Data["intents"], "left for an operator")
		})
	}
}

// corruptShard returns a shard of Service uid's "lb-1" named "bad" that
// holds data: a real shard's labels, read from one the journal wrote.
func corruptShard(t testing.TB, uid, data string) *v1.ConfigMap {
	cs := kubefake.NewClientset()
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, ccm.NewConfigMapJournal(cs.CoreV1(), ccm.ConfigMapJournalOptions{}).For(journalService(uid), "lb-1").
		Record(context.Background(), []lbrecon.Intent{{Kind: "backend", Name: "n", At: at}}))
	list, err := cs.CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	cm := list.Items[0].DeepCopy()
	cm.Name, cm.ResourceVersion = "bad", ""
	cm.Data = map[string]string{"intents": data}
	return cm
}

func newEngine() *lbrecontest.Engine {
	return lbrecontest.New(lbrecontest.Config{})
}

func isRetry(err error) bool {
	var re *api.RetryError
	return errors.As(err, &re)
}

// FuzzConfigMapJournalLoad feeds a shard's data, as an operator or a bug
// may leave it, to Load: it returns intents or an error, never panics, and
// what it returns is well formed.
func FuzzConfigMapJournalLoad(f *testing.F) {
	f.Add(`{"version":1,"intents":[{"kind":"backend","name":"a","spec":"s","token":"t","at":"2030-01-01T00:00:00Z"}]}`)
	f.Add(`{"version":1,"intents":[]}`)
	f.Add(`{"version":1,"intents":null}`)
	f.Add(`{"version":2}`)
	f.Add(`[]`)
	f.Add("")
	f.Fuzz(func(t *testing.T, data string) {
		cs := kubefake.NewClientset(corruptShard(t, "uid-1", data))
		got, err := ccm.NewConfigMapJournal(cs.CoreV1(), ccm.ConfigMapJournalOptions{}).For(journalService("uid-1"), "lb-1").Load(context.Background())
		if err != nil {
			require.ErrorIs(t, err, lbrecon.ErrCorruptJournal)
			return
		}
		for _, in := range got {
			require.NotEmpty(t, in.Kind)
			require.NotEmpty(t, in.Name)
			require.False(t, in.At.IsZero())
		}
	})
}
