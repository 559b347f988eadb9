package kubefake_test

// The differential check: the same seeded sequences of operations run on
// kubefake and on a real kube-apiserver (internal/testenv), and their
// normalised answers must be equal. What is compared: status codes and
// reasons (and the fields of a 422), the order of resourceVersions (not
// their values), what a write leaves (finalizers, a deletionTimestamp,
// the grace period), list contents under field selectors, and each
// watch's events in order (a 410 as an ERROR event, a watch ended by a
// restart). What is not: messages, timestamps, defaulted fields.

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/kubefake"
)

var (
	diffSeeds  = flag.Int("diff.seeds", 0, "random sequences the differential test runs besides its regression seeds (0: the committed seeds alone, so that a run is repeatable)")
	diffLength = flag.Int("diff.length", 60, "operations in each sequence of the differential test")
	diffUpdate = flag.Bool("diff.update", false, "rewrite testdata/differential/*.golden from the real apiserver")
)

// op is one step of a sequence. The same op runs on both servers; the
// values it refers to (a remembered object, a resourceVersion seen at an
// earlier step) are each server's own.
type op struct {
	Kind    string // see exec
	Res     string // configmaps, pods, leases
	Name    string
	Variant int // which flavour of the op (see exec)
	Ref     int // for a watch: which earlier resourceVersion, counted from the newest
}

func (o op) String() string {
	return fmt.Sprintf("%s %s/%s v%d r%d", o.Kind, o.Res, o.Name, o.Variant, o.Ref)
}

// generate draws a sequence from seed. At most one restart, in half the
// sequences, and only after some steps, so that there are
// resourceVersions to go stale.
func generate(seed uint64, n int) []op {
	r := rand.New(rand.NewPCG(seed, 0x6b756265))
	names := []string{"a", "b"}
	pick := func() string { return names[r.IntN(len(names))] }
	restarted := r.IntN(2) == 0 // half the sequences have no restart: it takes seconds on a real apiserver
	var ops []op
	for len(ops) < n {
		var o op
		switch k := r.IntN(100); {
		case k < 12:
			o = op{Kind: "create", Res: "configmaps", Name: pick(), Variant: r.IntN(4)}
		case k < 26:
			o = op{Kind: "update", Res: "configmaps", Name: pick(), Variant: r.IntN(36)}
		case k < 34:
			o = op{Kind: "patch", Res: "configmaps", Name: pick(), Variant: r.IntN(5)}
		case k < 42:
			o = op{Kind: "delete", Res: "configmaps", Name: pick(), Variant: r.IntN(3)}
		case k < 52:
			o = op{Kind: "create", Res: "pods", Name: pick(), Variant: r.IntN(6)}
		case k < 60:
			o = op{Kind: "delete", Res: "pods", Name: pick(), Variant: r.IntN(4)}
		case k < 63:
			o = op{Kind: "patch", Res: "pods", Name: pick(), Variant: 3}
		case k < 66:
			o = op{Kind: "create", Res: "leases", Name: pick()}
		case k < 70:
			o = op{Kind: "update", Res: "leases", Name: pick(), Variant: r.IntN(2)}
		case k < 75:
			o = op{Kind: "get", Res: []string{"configmaps", "pods"}[r.IntN(2)], Name: pick()}
		case k < 84:
			o = op{Kind: "list", Res: []string{"configmaps", "pods"}[r.IntN(2)], Variant: r.IntN(4)}
		case k < 94:
			o = op{Kind: "watch", Res: []string{"configmaps", "pods"}[r.IntN(2)], Variant: r.IntN(2), Ref: r.IntN(6)}
		case k < 97:
			o = op{Kind: "drain"}
		default:
			if restarted || len(ops) < n/3 {
				continue
			}
			restarted = true
			o = op{Kind: "restart"}
		}
		ops = append(ops, o)
	}
	return append(ops, op{Kind: "drain"})
}

// target is one server under test.
type target struct {
	cs      kubernetes.Interface
	ns      string
	restart func(ctx context.Context) error
}

// run is one sequence on one target.
type run struct {
	t       *testing.T
	tg      target
	out     []string
	known   map[string]runtime.Object // the last object each name was answered with
	rvs     []string                  // resourceVersions seen, in order (lists' included)
	watches []*openWatch
	drains  int
}

type openWatch struct {
	id  int
	res string
	w   watch.Interface
}

const foreignUID = types.UID("5f1d0c1e-0000-4000-8000-000000000000")

// rv marks an object's resourceVersion in a transcript, for normalise.
func rv(s string) string { return "⟨" + s + "⟩" }

// listRV marks a listing's resourceVersion. A real apiserver answers a list
// with etcd's current revision, which counts writes outside the test's
// namespace (the apiserver's own identity Lease, every 10 s), so a listing
// cannot be ranked among objects' versions by equality; normalise renders it
// as the greatest object version at or below it.
func listRV(s string) string { return "⟪" + s + "⟫" }

func (r *run) say(format string, args ...any) {
	r.out = append(r.out, fmt.Sprintf(format, args...))
}

// answer normalises an error: status code, reason, and a 422's fields.
func answer(err error) string {
	if err == nil {
		return "ok"
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return "error " + err.Error()
	}
	s := st.Status()
	a := fmt.Sprintf("%d %s", s.Code, s.Reason)
	if s.Reason == metav1.StatusReasonInvalid && s.Details != nil {
		var f []string
		for _, c := range s.Details.Causes {
			f = append(f, c.Field+":"+string(c.Type))
		}
		sort.Strings(f)
		a += " " + strings.Join(f, ",")
	}
	return a
}

// state normalises an object: its resourceVersion (order only), its
// finalizers, whether it is being deleted, and its grace period.
func state(obj runtime.Object) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "?"
	}
	s := fmt.Sprintf("%s rv=%s", m.GetName(), rv(m.GetResourceVersion()))
	if f := m.GetFinalizers(); len(f) > 0 {
		s += " fin=" + strings.Join(f, ",")
	}
	if m.GetDeletionTimestamp() != nil {
		s += " deleting"
	}
	if g := m.GetDeletionGracePeriodSeconds(); g != nil {
		s += fmt.Sprintf(" grace=%d", *g)
	}
	return s
}

func (r *run) remember(res string, obj runtime.Object, err error) string {
	if err != nil {
		return answer(err)
	}
	m, _ := meta.Accessor(obj)
	r.known[res+"/"+m.GetName()] = obj.DeepCopyObject()
	r.rvs = append(r.rvs, rv(m.GetResourceVersion()))
	return "ok " + state(obj)
}

// current reads the object as the server holds it now, quietly: the read
// only sets up the op that follows.
func (r *run) current(ctx context.Context, res, name string) runtime.Object {
	var obj runtime.Object
	var err error
	switch res {
	case "configmaps":
		obj, err = r.tg.cs.CoreV1().ConfigMaps(r.tg.ns).Get(ctx, name, metav1.GetOptions{})
	case "leases":
		obj, err = r.tg.cs.CoordinationV1().Leases(r.tg.ns).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil
	}
	return obj
}

func newCM(ns, name string, v int) *corev1.ConfigMap {
	c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"v": "0"}}
	if v&1 != 0 {
		c.Finalizers = []string{"example.com/hold"}
	}
	if v&2 != 0 {
		c.Labels = map[string]string{"app": "x"}
	}
	return c
}

func newPod(ns, name string, v int) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
	switch v % 3 {
	case 1:
		p.Spec.NodeName = "n1"
	case 2:
		p.Spec.NodeName = "n2"
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](7)
	}
	if v >= 3 {
		p.Finalizers = []string{"example.com/hold"}
	}
	return p
}

func (r *run) exec(ctx context.Context, o op) {
	cms := r.tg.cs.CoreV1().ConfigMaps(r.tg.ns)
	pods := r.tg.cs.CoreV1().Pods(r.tg.ns)
	leases := r.tg.cs.CoordinationV1().Leases(r.tg.ns)
	key := o.Res + "/" + o.Name
	switch o.Kind + " " + o.Res {
	case "create configmaps":
		obj, err := cms.Create(ctx, newCM(r.tg.ns, o.Name, o.Variant), metav1.CreateOptions{})
		r.say("%s: %s", o, r.remember(o.Res, obj, err))
	case "update configmaps":
		// Variant: from a fresh read or from the remembered object (which
		// may be stale or another incarnation's); with the resourceVersion
		// kept or dropped; with the uid kept, foreign or dropped; changing
		// the data, adding a finalizer or dropping them all.
		var base runtime.Object
		if o.Variant%2 == 0 {
			base = r.current(ctx, o.Res, o.Name)
		} else {
			base = r.known[key]
		}
		if base == nil {
			r.say("%s: skipped, nothing to update", o)
			return
		}
		c := base.DeepCopyObject().(*corev1.ConfigMap)
		switch (o.Variant / 2) % 3 {
		case 1:
			c.ResourceVersion = ""
		case 2:
			c.UID = foreignUID
		}
		if o.Variant >= 18 {
			c.UID = ""
		}
		switch (o.Variant / 6) % 3 {
		case 0:
			c.Data = map[string]string{"v": strconv.Itoa(len(r.out))}
		case 1:
			c.Finalizers = append(slices.Clone(c.Finalizers), "example.com/more")
		case 2:
			c.Finalizers = nil
		}
		obj, err := cms.Update(ctx, c, metav1.UpdateOptions{})
		r.say("%s: %s", o, r.remember(o.Res, obj, err))
	case "patch configmaps":
		var patch string
		switch o.Variant {
		case 0:
			patch = fmt.Sprintf(`{"data":{"v":"p%d"}}`, len(r.out))
		case 1: // a precondition from the remembered object
			k, ok := r.known[key]
			if !ok {
				r.say("%s: skipped, nothing remembered", o)
				return
			}
			m, _ := meta.Accessor(k)
			patch = fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"data":{"v":"q%d"}}`, m.GetResourceVersion(), len(r.out))
		case 2:
			patch = `{"metadata":{"finalizers":["example.com/hold","example.com/late"]}}`
		case 3:
			patch = `{"metadata":{"finalizers":null}}`
		case 4:
			patch = fmt.Sprintf(`{"metadata":{"uid":%q}}`, foreignUID)
		}
		obj, err := cms.Patch(ctx, o.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		r.say("%s: %s", o, r.remember(o.Res, obj, err))
	case "delete configmaps":
		opts := metav1.DeleteOptions{}
		if k, ok := r.known[key]; ok && o.Variant > 0 {
			m, _ := meta.Accessor(k)
			if o.Variant == 1 {
				opts.Preconditions = &metav1.Preconditions{UID: ptr.To(m.GetUID())}
			} else {
				opts.Preconditions = &metav1.Preconditions{ResourceVersion: ptr.To(m.GetResourceVersion())}
			}
		}
		r.say("%s: %s", o, answer(cms.Delete(ctx, o.Name, opts)))
	case "create pods":
		obj, err := pods.Create(ctx, newPod(r.tg.ns, o.Name, o.Variant), metav1.CreateOptions{})
		r.say("%s: %s", o, r.remember(o.Res, obj, err))
	case "delete pods":
		opts := metav1.DeleteOptions{}
		switch o.Variant {
		case 1:
			opts.GracePeriodSeconds = ptr.To[int64](0)
		case 2:
			opts.GracePeriodSeconds = ptr.To[int64](3)
		case 3:
			opts.GracePeriodSeconds = ptr.To[int64](60)
		}
		r.say("%s: %s", o, answer(pods.Delete(ctx, o.Name, opts)))
	case "patch pods":
		obj, err := pods.Patch(ctx, o.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		r.say("%s: %s", o, r.remember(o.Res, obj, err))
	case "create leases":
		obj, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: r.tg.ns, Name: o.Name}}, metav1.CreateOptions{})
		r.say("%s: %s", o, r.remember(o.Res, obj, err))
	case "update leases":
		base := r.current(ctx, o.Res, o.Name)
		if base == nil {
			r.say("%s: skipped, nothing to update", o)
			return
		}
		l := base.(*coordinationv1.Lease)
		l.Spec.HolderIdentity = ptr.To(fmt.Sprint("h", len(r.out)))
		if o.Variant == 1 {
			l.ResourceVersion = ""
		}
		obj, err := leases.Update(ctx, l, metav1.UpdateOptions{})
		r.say("%s: %s", o, r.remember(o.Res, obj, err))
	case "get configmaps":
		obj, err := cms.Get(ctx, o.Name, metav1.GetOptions{})
		r.say("%s: %s", o, r.remember(o.Res, obj, err))
	case "get pods":
		obj, err := pods.Get(ctx, o.Name, metav1.GetOptions{})
		r.say("%s: %s", o, r.remember(o.Res, obj, err))
	case "list configmaps", "list pods":
		r.list(ctx, o)
	case "watch configmaps", "watch pods":
		r.watch(ctx, o)
	case "drain ":
		r.drain(ctx)
	case "restart ":
		r.drain(ctx)
		if err := r.tg.restart(ctx); err != nil {
			r.t.Fatalf("restart: %v", err)
		}
		for _, w := range r.watches {
			r.say("watch#%d after the restart: %s", w.id, r.readUntil(ctx, w, ""))
		}
		r.watches = nil
		r.say("%s: done", o)
	default:
		r.t.Fatalf("unknown op %s", o)
	}
}

// selectors of list and watch variants: none, the one each resource
// filters on, and (for lists) a field it does not select on.
func selector(res string, v int) metav1.ListOptions {
	switch {
	case v == 1 && res == "pods":
		return metav1.ListOptions{FieldSelector: "spec.nodeName=n1"}
	case v == 1:
		return metav1.ListOptions{LabelSelector: "app=x"}
	case v == 2:
		return metav1.ListOptions{FieldSelector: "metadata.name=b"}
	case v == 3 && res == "pods":
		return metav1.ListOptions{FieldSelector: "spec.priority=1"}
	case v == 3:
		return metav1.ListOptions{FieldSelector: "spec.nodeName=n1"}
	}
	return metav1.ListOptions{}
}

func (r *run) list(ctx context.Context, o op) {
	opts := selector(o.Res, o.Variant)
	var obj runtime.Object
	var err error
	if o.Res == "pods" {
		obj, err = r.tg.cs.CoreV1().Pods(r.tg.ns).List(ctx, opts)
	} else {
		obj, err = r.tg.cs.CoreV1().ConfigMaps(r.tg.ns).List(ctx, opts)
	}
	if err != nil {
		r.say("%s: %s", o, answer(err))
		return
	}
	lm, _ := meta.ListAccessor(obj)
	r.rvs = append(r.rvs, listRV(lm.GetResourceVersion()))
	items, _ := meta.ExtractList(obj)
	var got []string
	for _, it := range items {
		got = append(got, state(it))
	}
	sort.Strings(got)
	r.say("%s: ok [%s]", o, strings.Join(got, "; "))
}

func (r *run) watch(ctx context.Context, o op) {
	if len(r.rvs) == 0 {
		r.say("%s: skipped, no resourceVersion yet", o)
		return
	}
	from := r.rvs[max(len(r.rvs)-1-o.Ref, 0)]
	opts := selector(o.Res, o.Variant)
	opts.ResourceVersion = strings.Trim(from, "⟨⟩⟪⟫")
	var w watch.Interface
	var err error
	if o.Res == "pods" {
		w, err = r.tg.cs.CoreV1().Pods(r.tg.ns).Watch(ctx, opts)
	} else {
		w, err = r.tg.cs.CoreV1().ConfigMaps(r.tg.ns).Watch(ctx, opts)
	}
	id := len(r.out)
	r.say("%s: watch#%d from %s: %s", o, id, from, answer(err))
	if err == nil {
		r.watches = append(r.watches, &openWatch{id: id, res: o.Res, w: w})
	}
}

// drain brings every open watch up to date: a sentinel object that every
// watch of its resource selects is created, and each watch is read up to
// its ADDED event (or to its end).
func (r *run) drain(ctx context.Context) {
	if len(r.watches) == 0 {
		return
	}
	r.drains++
	name := fmt.Sprintf("zz-sentinel-%d", r.drains)
	for _, res := range []string{"configmaps", "pods"} {
		var err error
		if res == "pods" {
			p := newPod(r.tg.ns, name, 1)
			_, err = r.tg.cs.CoreV1().Pods(r.tg.ns).Create(ctx, p, metav1.CreateOptions{})
		} else {
			_, err = r.tg.cs.CoreV1().ConfigMaps(r.tg.ns).Create(ctx, newCM(r.tg.ns, name, 2), metav1.CreateOptions{})
		}
		if err != nil {
			r.t.Fatalf("sentinel %s/%s: %v", res, name, err)
		}
	}
	var open []*openWatch
	for _, w := range r.watches {
		got := r.readUntil(ctx, w, name)
		r.say("watch#%d: %s", w.id, got)
		if !strings.HasSuffix(got, "closed") {
			open = append(open, w)
		}
	}
	r.watches = open
}

// readUntil reads w until the ADDED event of sentinel (not recorded), or
// until it closes, and renders what it saw.
func (r *run) readUntil(ctx context.Context, w *openWatch, sentinel string) string {
	var seen []string
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case ev, ok := <-w.w.ResultChan():
			if !ok {
				return strings.Join(append(seen, "closed"), "; ")
			}
			if ev.Type == watch.Error {
				seen = append(seen, "ERROR "+answer(apierrors.FromObject(ev.Object)))
				continue
			}
			m, err := meta.Accessor(ev.Object)
			if err != nil {
				seen = append(seen, fmt.Sprintf("%s %T", ev.Type, ev.Object))
				continue
			}
			if sentinel != "" && m.GetName() == sentinel && ev.Type == watch.Added {
				return strings.Join(append(seen, "up to date"), "; ")
			}
			if strings.HasPrefix(m.GetName(), "zz-sentinel-") {
				continue // an earlier drain's sentinel
			}
			seen = append(seen, string(ev.Type)+" "+state(ev.Object))
		case <-deadline.C:
			w.w.Stop()
			return strings.Join(append(seen, "no end within 60s"), "; ")
		case <-ctx.Done():
			return "cancelled"
		}
	}
}

var (
	rvMark   = regexp.MustCompile(`⟨([0-9]*)⟩`)
	listMark = regexp.MustCompile(`⟪([0-9]*)⟫`)
)

// normalise replaces every object's resourceVersion by its rank among those
// the transcript shows, and every listing's by "after" the rank of the
// greatest object version at or below it, so that two servers' transcripts
// compare on order alone.
func normalise(lines []string) []string {
	var all []uint64
	for _, l := range lines {
		for _, m := range rvMark.FindAllStringSubmatch(l, -1) {
			n, _ := strconv.ParseUint(m[1], 10, 64)
			all = append(all, n)
		}
	}
	slices.Sort(all)
	all = slices.Compact(all)
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = rvMark.ReplaceAllStringFunc(l, func(s string) string {
			n, _ := strconv.ParseUint(rvMark.FindStringSubmatch(s)[1], 10, 64)
			k, _ := slices.BinarySearch(all, n)
			return fmt.Sprint("#", k)
		})
		out[i] = listMark.ReplaceAllStringFunc(out[i], func(s string) string {
			n, _ := strconv.ParseUint(listMark.FindStringSubmatch(s)[1], 10, 64)
			k, found := slices.BinarySearch(all, n)
			if !found {
				k-- // the greatest object version below n
			}
			return fmt.Sprint("after #", k)
		})
	}
	return out
}

// transcript runs ops on tg and returns its normalised answers.
func transcript(t *testing.T, tg target, ops []op) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := &run{t: t, tg: tg, known: map[string]runtime.Object{}}
	for _, o := range ops {
		r.exec(ctx, o)
	}
	for _, w := range r.watches {
		w.w.Stop()
	}
	return normalise(r.out)
}

// setup creates what pods need on an apiserver: the namespace and its
// default service account (the controller that makes it does not run).
func setup(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func fakeTarget(t *testing.T, ns string) target {
	srv := kubefake.Config{}.NewServer()
	c := srv.NewClient()
	setup(t, c, ns)
	return target{cs: c, ns: ns, restart: func(context.Context) error { srv.Restart(); return nil }}
}

// regressionSeeds reads testdata/differential/seeds: one seed a line,
// then a comment saying what it found.
func regressionSeeds(t *testing.T) []uint64 {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "differential", "seeds"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var seeds []uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		n, err := strconv.ParseUint(strings.Fields(line)[0], 10, 64)
		if err != nil {
			t.Fatalf("seeds: %q: %v", line, err)
		}
		seeds = append(seeds, n)
	}
	return seeds
}

func golden(seed uint64) string {
	return filepath.Join("testdata", "differential", fmt.Sprintf("%d.golden", seed))
}

// compare fails the test at the first line where got differs from want.
func compare(t *testing.T, seed uint64, ops []op, got, want []string, gotName, wantName string) {
	t.Helper()
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("seed %d differs at answer %d:\n  %s: %s\n  %s: %s\nsequence:\n  %s\n%s transcript:\n  %s",
				seed, i, gotName, g, wantName, w, joinOps(ops), wantName, strings.Join(want, "\n  "))
			return
		}
	}
}

func joinOps(ops []op) string {
	s := make([]string, len(ops))
	for i, o := range ops {
		s[i] = o.String()
	}
	return strings.Join(s, "\n  ")
}

// The regression seeds' transcripts, as the real apiserver answered them
// (committed), against kubefake: runs under -short, so that a change to
// kubefake that brings back a difference fails without a server.
func TestDifferentialGolden(t *testing.T) {
	for _, seed := range regressionSeeds(t) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			want, err := os.ReadFile(golden(seed))
			if err != nil {
				t.Skipf("no transcript of the apiserver for seed %d yet: %v", seed, err)
			}
			ops := generate(seed, *diffLength)
			got := transcript(t, fakeTarget(t, fmt.Sprint("diff-", seed)), ops)
			compare(t, seed, ops, got, strings.Split(strings.TrimSuffix(string(want), "\n"), "\n"), "kubefake", "apiserver")
		})
	}
}

// The same sequences on kubefake and on a real kube-apiserver give the
// same normalised answers: the regression seeds, then -diff.seeds more
// drawn at random (each subtest is named by its seed). The suite runs the
// committed seeds alone, so that its result does not depend on the draw;
// a search for new differences passes -diff.seeds, and a seed that finds
// one goes into testdata/differential/seeds.
func TestDifferentialAgainstAPIServer(t *testing.T) {
	a := testenv.APIServer(t)
	cfg := a.Config()
	cfg.QPS, cfg.Burst = 1000, 1000
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	seeds := regressionSeeds(t)
	for range *diffSeeds {
		seeds = append(seeds, rand.Uint64()%1_000_000)
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			ns := fmt.Sprint("diff-", seed)
			ops := generate(seed, *diffLength)
			setup(t, kube, ns)
			want := transcript(t, target{cs: kube, ns: ns, restart: a.Restart}, ops)
			got := transcript(t, fakeTarget(t, ns), ops)
			if *diffUpdate && slices.Contains(regressionSeeds(t), seed) {
				if err := os.WriteFile(golden(seed), []byte(strings.Join(want, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			compare(t, seed, ops, got, want, "kubefake", "apiserver")
		})
	}
}

// The harness itself is deterministic on kubefake: a sequence gives the
// same transcript twice, so a difference from the apiserver is the
// server's, not the harness's.
func TestDifferentialHarnessIsDeterministic(t *testing.T) {
	for seed := range uint64(3) {
		ops := generate(seed, *diffLength)
		a := transcript(t, fakeTarget(t, "d"), ops)
		b := transcript(t, fakeTarget(t, "d"), ops)
		compare(t, seed, ops, a, b, "first", "second")
	}
}
