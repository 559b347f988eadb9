package ccm_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
)

// Operator edits of the ConfigMap journal and writers racing it: a busy
// writer delays a journal write but never makes it give up, a server
// answering 409 for ever costs a bounded number of requests, and a shard
// deleted mid-term loses no intent the process holds.

// journalIntent is an intent of a server named name.
func journalIntent(name string) lbrecon.Intent {
	return lbrecon.Intent{Kind: lbrecon.KindServer, Name: name, Spec: "s", Token: "t-" + name,
		At: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// deleteShards deletes every shard of the journal, as an operator would.
func deleteShards(t *testing.T, c *kubefake.Client) int {
	t.Helper()
	list, err := c.CoreV1().ConfigMaps("default").List(t.Context(), metav1.ListOptions{LabelSelector: ccm.JournalServiceLabel})
	require.NoError(t, err)
	for _, cm := range list.Items {
		require.NoError(t, c.CoreV1().ConfigMaps("default").Delete(t.Context(), cm.Name, metav1.DeleteOptions{}))
	}
	return len(list.Items)
}

// stored returns the intents the journal holds on the server, as a new
// process reads them.
func storedIntents(t *testing.T, c *kubefake.Client, svc *v1.Service) []lbrecon.Intent {
	t.Helper()
	got, err := ccm.NewConfigMapJournal(c.CoreV1(), ccm.ConfigMapJournalOptions{}).For(svc, "lb-1").Load(t.Context())
	require.NoError(t, err)
	return got
}

// A writer that changes the shard before each of our updates, ten times in
// a row (three would exhaust a raw bound), delays the write but does not
// make it give up: each read finds another writer's change, which is
// progress. Its changes are kept.
func TestConfigMapJournalBusyWriterDoesNotMakeItGiveUp(t *testing.T) {
	srv := kubefake.Config{}.NewServer()
	ours, other := srv.NewClient(), srv.NewClient()
	svc := journalService("uid-1")
	scope := ccm.NewConfigMapJournal(ours.CoreV1(), ccm.ConfigMapJournalOptions{}).For(svc, "lb-1")
	require.NoError(t, scope.Record(t.Context(), []lbrecon.Intent{journalIntent("a")}))

	busy := 10
	ours.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if busy == 0 {
			return false, nil, nil
		}
		busy--
		name := a.(k8stesting.UpdateAction).GetObject().(*v1.ConfigMap).Name
		cm, err := other.CoreV1().ConfigMaps("default").Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations["other-writer"] = time.Duration(busy).String()
		_, err = other.CoreV1().ConfigMaps("default").Update(t.Context(), cm, metav1.UpdateOptions{})
		require.NoError(t, err)
		return false, nil, nil // ours goes on to the server, stale: 409
	})
	before := ours.Requests()
	require.NoError(t, scope.Record(t.Context(), []lbrecon.Intent{journalIntent("b")}), "a busy writer is progress")
	used := ours.Requests().Sub(before)
	require.Zero(t, busy)
	require.ElementsMatch(t, []lbrecon.Intent{journalIntent("a"), journalIntent("b")}, storedIntents(t, ours, svc))
	require.Equal(t, 11, used[kubefake.Request{Verb: "update", Resource: "configmaps"}], "one update per conflict, one that lands")
	require.Equal(t, 10, used[kubefake.Request{Verb: "list", Resource: "configmaps"}], "one read per conflict")
}

// A server that answers 409 for ever, with nothing changed behind it, is
// given up on after three reads that find the shards as before: a bounded
// number of requests, an error that is not permanent (the next pass
// retries), and no intent lost.
func TestConfigMapJournalEndlessConflictsGiveUp(t *testing.T) {
	srv := kubefake.Config{}.NewServer()
	ours := srv.NewClient()
	svc := journalService("uid-1")
	scope := ccm.NewConfigMapJournal(ours.CoreV1(), ccm.ConfigMapJournalOptions{}).For(svc, "lb-1")
	require.NoError(t, scope.Record(t.Context(), []lbrecon.Intent{journalIntent("a")}))
	srv.Inject(kubefake.Fault{Verb: "update", Resource: "configmaps", Answer: kubefake.Conflict()})
	before := ours.Requests()
	err := scope.Record(t.Context(), []lbrecon.Intent{journalIntent("b")})
	require.Error(t, err)
	require.True(t, apierrors.IsConflict(err), "%v", err)
	used := ours.Requests().Sub(before)
	srv.ClearFaults()
	require.Equal(t, 4, used[kubefake.Request{Verb: "update", Resource: "configmaps"}], "%v", used)
	require.Equal(t, 3, used[kubefake.Request{Verb: "list", Resource: "configmaps"}], "%v", used)
	require.Equal(t, []lbrecon.Intent{journalIntent("a")}, storedIntents(t, ours, svc))
}

// An operator deletes the journal's ConfigMaps while intents are in
// flight: the next journal write (Record or Forget) writes the held
// intents again, and Load (a new term's read) returns them, so a
// successor still finds every creation not yet forgotten (no duplicate),
// and a forgotten one is not brought back (no stale entry). Each write
// costs a bounded number of requests.
func TestConfigMapJournalShardDeletedMidTerm(t *testing.T) {
	srv := kubefake.Config{}.NewServer()
	ours, operator := srv.NewClient(), srv.NewClient()
	svc := journalService("uid-1")
	scope := ccm.NewConfigMapJournal(ours.CoreV1(), ccm.ConfigMapJournalOptions{}).For(svc, "lb-1")
	ctx := t.Context()
	a, b, c := journalIntent("a"), journalIntent("b"), journalIntent("c")
	require.NoError(t, scope.Record(ctx, []lbrecon.Intent{a, b}))

	require.Equal(t, 1, deleteShards(t, operator))
	before := ours.Requests()
	require.NoError(t, scope.Record(ctx, []lbrecon.Intent{c}))
	require.LessOrEqual(t, ours.Requests().Sub(before).Total(), 4, "update (404), list, create: no spin")
	require.ElementsMatch(t, []lbrecon.Intent{a, b, c}, storedIntents(t, ours, svc), "the held intents written again")

	require.Equal(t, 1, deleteShards(t, operator))
	require.NoError(t, scope.Forget(ctx, []lbrecon.Intent{a}))
	require.ElementsMatch(t, []lbrecon.Intent{b, c}, storedIntents(t, ours, svc), "a Forget writes the rest again")

	require.Equal(t, 1, deleteShards(t, operator))
	got, err := scope.Load(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []lbrecon.Intent{b, c}, got, "a new term's read returns what the process holds")
	require.NoError(t, scope.Forget(ctx, []lbrecon.Intent{b}))
	require.ElementsMatch(t, []lbrecon.Intent{c}, storedIntents(t, ours, svc))
	require.NoError(t, scope.Forget(ctx, []lbrecon.Intent{c}))
	require.Empty(t, storedIntents(t, ours, svc))
	require.Zero(t, deleteShards(t, operator), "an emptied shard is deleted")
}
