package kubestore

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/reconkit/reconkit/versiongate"
)

// ErrStatusDeleted is wrapped by every status operation while the status
// Lease is being deleted (its deletionTimestamp is set; the store's
// finalizer holds it). The status is then unreadable, never absent: the
// gate waits, and no leader takes it for a first boot. The error says how
// to clear it. It is versiongate.ErrStatusDeleted, the error the gate's
// leader answers within its term by fencing again (see Fence).
var ErrStatusDeleted = versiongate.ErrStatusDeleted

// revertTimeout bounds the revert of an unvalidated status write after
// the request's own context ended.
const revertTimeout = 5 * time.Second

// fenceAttempts bounds the reads of one Fence or WriteStatus that find the
// status Lease as the last one did: each read after the first follows a
// conflict (409), a creation that found the Lease there already, or a
// deletion finished. A read that finds a new resourceVersion starts the
// count again: another writer got through, and as each writer stops once
// it reads a higher token, writers racing for the Lease end with the
// highest token's write (the conformance suite's
// ConcurrentFencesOneWinner). Past the bound the call fails, and the gate
// retries it with its backoff: a server that answers 409 for ever costs a
// bounded number of requests per attempt, never a spin.
const fenceAttempts = 3

// noPrevious is AnnotationUnvalidated's value when the write replaced no
// status. base64 never produces it.
const noPrevious = "-"

// statusValue decodes the status Lease's value; nil when it has none. A
// value that is not base64 is a corrupt status: the error wraps
// versiongate.ErrCorruptStatus.
func (s *Store) statusValue(l *coordinationv1.Lease) ([]byte, error) {
	v, ok := l.Annotations[AnnotationValue]
	if !ok {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: annotation %s is not base64 (%v); the next leader overwrites it after its reconcile",
			versiongate.ErrCorruptStatus, s.ref(l.Name), AnnotationValue, err)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// stored reads the status Lease as a StoredStatus, refusing one that is
// being deleted.
func (s *Store) stored(l *coordinationv1.Lease) (versiongate.StoredStatus, error) {
	if err := s.checkLive(l); err != nil {
		return versiongate.StoredStatus{}, err
	}
	rev, err := revision(s.ref(l.Name), l.ResourceVersion)
	if err != nil {
		return versiongate.StoredStatus{}, err
	}
	v, err := s.statusValue(l)
	if err != nil {
		// A corrupt status, not a failed read: the gate blocks on it, and
		// its leader repairs it.
		return versiongate.StoredStatus{Revision: rev, Corrupt: err}, nil
	}
	// A status Lease without a value, not being deleted, was created by a
	// Fence and never held a status that stood: a deleted one would be
	// terminating (the finalizer), and a write is taken back only while
	// unvalidated; unless a Fence created it again after a deletion, as
	// its AnnotationStatusDeleted says.
	_, recreated := l.Annotations[AnnotationStatusDeleted]
	return versiongate.StoredStatus{Value: v, Revision: rev, FirstBoot: v == nil && !recreated}, nil
}

// checkLive returns an error wrapping ErrStatusDeleted if the status Lease
// is being deleted, and one naming the clash if the Lease by its name is
// not this gate's status.
func (s *Store) checkLive(l *coordinationv1.Lease) error {
	if err := s.notOurs(l, RoleStatus); err != nil {
		return err
	}
	if l.DeletionTimestamp == nil {
		return nil
	}
	return fmt.Errorf("%w: %s has been deleting since %s, held by the finalizers %v. Nodes may still serve on the status it holds, so no leader treats it as a first boot. "+
		"The gate's leader finishes the deletion and creates the status Lease again, without a status, within a reconcile interval (or at the start of the next term): it then reconciles only once no incompatible node has a record. "+
		"With no leader running (a gate being uninstalled), remove the finalizer (kubectl -n %s patch lease %s --type=json -p '[{\"op\":\"remove\",\"path\":\"/metadata/finalizers\"}]')",
		ErrStatusDeleted, s.ref(l.Name), l.DeletionTimestamp.UTC().Format(time.RFC3339), l.Finalizers, s.ns, l.Name)
}

// ReadStatus implements versiongate.Store with one LIST of the status
// Lease (field selector metadata.name), resourceVersion unset: a
// linearizable read. The revision it returns is the listing's, not the
// status Lease's own resourceVersion: the Lease may be unchanged for
// longer than the server keeps watch history (or than it has been up,
// after a restart), and a watch from its resourceVersion would then get
// 410 Gone at every attempt, whereas the listing's is as recent as the
// server's state, so one fresh read always gives a watch the server can
// serve (TestStatusWatchFromListingAfterHistoryMovedOn).
func (s *Store) ReadStatus(ctx context.Context) (versiongate.StoredStatus, error) {
	name := s.statusName()
	sel := "metadata.name=" + name
	list, err := s.leases.List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return versiongate.StoredStatus{}, s.wrapSel("list", sel, err)
	}
	rev, err := revision("the status listing", list.ResourceVersion)
	if err != nil {
		return versiongate.StoredStatus{}, err
	}
	for i := range list.Items {
		if list.Items[i].Name == name {
			st, err := s.stored(&list.Items[i])
			if err != nil {
				return versiongate.StoredStatus{}, err
			}
			st.Revision = max(st.Revision, rev)
			return st, nil
		}
	}
	return versiongate.StoredStatus{Revision: rev}, nil
}

// WatchStatus implements versiongate.Store: a watch of the status Lease
// (field selector metadata.name) from rev, reopened as WatchRecords'. A
// status being deleted ends it with an error wrapping ErrStatusDeleted.
func (s *Store) WatchStatus(ctx context.Context, rev int64, fn func(versiongate.StoredStatus) bool) error {
	opts := metav1.ListOptions{FieldSelector: "metadata.name=" + s.statusName()}
	return s.watchLoop(ctx, s.rand.status, s.ns, s.leases, rev, opts, nil, nil, func(ev watch.EventType, l *coordinationv1.Lease, r int64) (bool, error) {
		if l.Name != s.statusName() {
			return false, nil
		}
		if ev == watch.Deleted {
			return fn(versiongate.StoredStatus{Revision: r}), nil
		}
		st, err := s.stored(l)
		if err != nil {
			return false, err
		}
		return fn(st), nil
	})
}

// term is the fencing token the status Lease holds; 0 when none.
func (s *Store) term(l *coordinationv1.Lease) (uint64, error) {
	v, ok := l.Annotations[AnnotationTerm]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("versiongate/kubestore: %s: annotation %s=%q is not a token; remove it (kubectl -n %s annotate lease %s %s-) and the next term fences the status anew",
			s.ref(l.Name), AnnotationTerm, v, s.ns, l.Name, AnnotationTerm)
	}
	return n, nil
}

// fencedOff is the error for a status whose fence holds stored, above tok.
func (s *Store) fencedOff(stored, tok uint64) error {
	name := s.statusName()
	return &versiongate.FencedOffError{
		Fence:  fmt.Sprintf("the annotation %s of %s", AnnotationTerm, s.ref(name)),
		Stored: stored,
		Token:  tok,
		Clear:  fmt.Sprintf("remove the annotation (kubectl -n %s annotate lease %s %s-), and the next term fences the status anew", s.ns, name, AnnotationTerm),
	}
}

func checkToken(what string, tok uint64) error {
	if tok == 0 || tok == ^uint64(0) {
		return fmt.Errorf("versiongate/kubestore: %s: token %d out of range", what, tok)
	}
	return nil
}

// Fence implements versiongate.Store: it raises the status Lease's term
// annotation to the term's token in an update conditioned on the
// resourceVersion read (a conflict reads again), creating the Lease, with
// its finalizer, if absent. A higher stored token is a
// *versiongate.FencedOffError. Raising the term also undoes an earlier
// term's status write that was never validated (see WriteStatus): its
// value goes back to the one it replaced, in the same update.
//
// A status Lease being deleted (an operator's delete, held by the
// finalizer) whose term is at most the token is deleted for good: Fence
// removes the finalizer, conditioned on the resourceVersion read, and
// creates the Lease again with the token as its term, so the fence goes
// on from where the deleted Lease held it, never back, and with
// AnnotationStatusDeleted, so the status reads as missing, never as a
// first boot: the gate then reconciles only once no incompatible node has
// a record, and writes conditioned on the records. A deleted Lease whose
// term is above the token fences the term off as a live one does; one
// held by another finalizer too returns an error wrapping
// ErrStatusDeleted that names it.
func (s *Store) Fence(ctx context.Context, t versiongate.Term) error {
	tok := t.Token()
	if err := checkToken("fence", tok); err != nil {
		return err
	}
	name := s.statusName()
	var lastRV string // the status Lease's resourceVersion at the last read
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if attempt > fenceAttempts {
			return fmt.Errorf("versiongate/kubestore: fence: %s changed under each of %d attempts (conflicts); retrying later", s.ref(name), fenceAttempts)
		}
		cur, err := s.leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && !apiMissing(err) {
			ann := map[string]string{AnnotationTerm: strconv.FormatUint(tok, 10)}
			s.mu.Lock()
			deletedAt := s.statusDeletedAt
			s.mu.Unlock()
			if deletedAt != "" {
				ann[AnnotationStatusDeleted] = deletedAt
			}
			_, err := s.leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Namespace:   s.ns,
				Labels:      map[string]string{LabelGate: s.gate, LabelRole: RoleStatus},
				Annotations: ann,
				Finalizers:  []string{Finalizer},
			}}, metav1.CreateOptions{})
			if err == nil && deletedAt != "" {
				s.mu.Lock()
				if s.statusDeletedAt == deletedAt {
					s.statusDeletedAt = ""
				}
				s.mu.Unlock()
				logr.FromContextOrDiscard(ctx).Info("Created the status Lease again after its deletion, without a status: reconciling once no incompatible node has a record", "lease", s.ref(name), "deletedAt", deletedAt, "token", tok)
			}
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			if err != nil {
				return s.wrap("create", name, err)
			}
			return nil
		}
		if err != nil {
			return s.wrap("get", name, err)
		}
		if cur.ResourceVersion != lastRV {
			// Another writer got through since the last read: progress,
			// not a server answering 409 for ever.
			lastRV, attempt = cur.ResourceVersion, 1
		}
		if err := s.notOurs(cur, RoleStatus); err != nil {
			return err
		}
		stored, err := s.term(cur)
		if err != nil {
			return err
		}
		if stored > tok {
			return s.fencedOff(stored, tok)
		}
		if cur.DeletionTimestamp != nil {
			// Seen deleting, whoever finishes the deletion: the Lease
			// created next is no first boot.
			s.mu.Lock()
			s.statusDeletedAt = cur.DeletionTimestamp.UTC().Format(time.RFC3339)
			s.mu.Unlock()
			if err := s.finishDelete(ctx, cur); err != nil {
				return err
			}
			continue
		}
		if stored == tok {
			return nil
		}
		next := cur.DeepCopy()
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		next.Annotations[AnnotationTerm] = strconv.FormatUint(tok, 10)
		if prev, ok := next.Annotations[AnnotationUnvalidated]; ok {
			logr.FromContextOrDiscard(ctx).Info("Undoing an earlier term's status write that was never validated", "lease", s.ref(name), "token", tok, "earlierToken", stored)
			undo(next, prev)
		}
		if !hasFinalizer(next) {
			next.Finalizers = append(next.Finalizers, Finalizer)
		}
		_, err = s.leases.Update(ctx, next, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return s.wrap("update", name, err)
		}
		return nil
	}
}

// finishDelete removes the store's finalizer from the status Lease cur,
// which is being deleted, in an update conditioned on its
// resourceVersion, so that the server deletes it; after a conflict the
// caller reads again. A Lease that another finalizer still holds is an
// error wrapping ErrStatusDeleted.
func (s *Store) finishDelete(ctx context.Context, cur *coordinationv1.Lease) error {
	at := cur.DeletionTimestamp.UTC().Format(time.RFC3339)
	if !hasFinalizer(cur) {
		return fmt.Errorf("%w: %s, deleted at %s, is held by the finalizers %v of another controller; the next term creates the status Lease again once it is gone",
			ErrStatusDeleted, s.ref(cur.Name), at, cur.Finalizers)
	}
	next := cur.DeepCopy()
	next.Finalizers = slices.DeleteFunc(next.Finalizers, func(f string) bool { return f == Finalizer })
	_, err := s.leases.Update(ctx, next, metav1.UpdateOptions{})
	switch {
	case err == nil:
		logr.FromContextOrDiscard(ctx).Info("The status Lease was deleted; finishing its deletion to create it again", "lease", s.ref(cur.Name), "deletedAt", at)
		return nil
	case apierrors.IsConflict(err), apierrors.IsNotFound(err) && !apiMissing(err):
		return nil
	}
	return s.wrap("update", cur.Name, err)
}

func hasFinalizer(l *coordinationv1.Lease) bool {
	for _, f := range l.Finalizers {
		if f == Finalizer {
			return true
		}
	}
	return false
}

// undo puts back the value an unvalidated write replaced (prev, as
// AnnotationUnvalidated holds it) and drops the marker.
func undo(l *coordinationv1.Lease, prev string) {
	if prev == noPrevious {
		delete(l.Annotations, AnnotationValue)
	} else {
		l.Annotations[AnnotationValue] = prev
	}
	delete(l.Annotations, AnnotationUnvalidated)
}

// WriteStatus implements versiongate.Store.
//
// The term is checked by the server: the status Lease is read (GET,
// resourceVersion unset), the write refused unless its term annotation
// equals the term's token (a higher one is a *versiongate.FencedOffError;
// a lower one or none means the term did not fence), and the update is
// conditioned on the resourceVersion read, so that a Fence landing in
// between makes the server refuse it (409; the store reads again and
// checks again).
//
// With nodesRev > 0 the write is validated after it is applied: the write
// marks the status AnnotationUnvalidated (with the value it replaced),
// then a LIST of the records (resourceVersion unset) must show only
// records this store delivered through ListRecords or WatchRecords, with
// the values delivered, unchanged since nodesRev. If so, an update
// conditioned on the written resourceVersion drops the mark; if not, one
// puts the replaced value back, and WriteStatus returns an error wrapping
// versiongate.ErrNodesChanged. A write whose validation could not finish
// (the LIST failed, the process died) stays marked; the next term's Fence
// puts the replaced value back. See the package doc for why this is safe.
func (s *Store) WriteStatus(ctx context.Context, t versiongate.Term, value []byte, nodesRev int64) error {
	tok := t.Token()
	if err := checkToken("write status", tok); err != nil {
		return err
	}
	name := s.statusName()
	var written *coordinationv1.Lease
	var lastRV string // the status Lease's resourceVersion at the last read
	for attempt := 1; written == nil; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if attempt > fenceAttempts {
			return fmt.Errorf("versiongate/kubestore: write status: %s changed under each of %d attempts (conflicts); retrying later", s.ref(name), fenceAttempts)
		}
		cur, err := s.leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && !apiMissing(err) {
			return fmt.Errorf("%w: %s does not exist: term %d did not fence", versiongate.ErrLeadershipLost, s.ref(name), tok)
		}
		if err != nil {
			return s.wrap("get", name, err)
		}
		if cur.ResourceVersion != lastRV {
			// Another writer got through since the last read: progress.
			lastRV, attempt = cur.ResourceVersion, 1
		}
		if err := s.checkLive(cur); err != nil {
			return err
		}
		stored, err := s.term(cur)
		if err != nil {
			return err
		}
		switch {
		case stored > tok:
			return s.fencedOff(stored, tok)
		case stored < tok:
			return fmt.Errorf("%w: %s holds token %d: term %d did not fence", versiongate.ErrLeadershipLost, s.ref(name), stored, tok)
		}
		next := cur.DeepCopy()
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		prev, hadValue := next.Annotations[AnnotationValue]
		next.Annotations[AnnotationValue] = base64.StdEncoding.EncodeToString(value)
		if nodesRev > 0 {
			// Keep the mark of an earlier unvalidated write of this term:
			// it holds the value before either.
			if _, marked := next.Annotations[AnnotationUnvalidated]; !marked {
				if !hadValue {
					prev = noPrevious
				}
				next.Annotations[AnnotationUnvalidated] = prev
			}
		} else {
			delete(next.Annotations, AnnotationUnvalidated)
		}
		written, err = s.leases.Update(ctx, next, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			written = nil
			continue
		}
		if err != nil {
			return s.wrap("update", name, err)
		}
	}
	if nodesRev <= 0 {
		return nil
	}
	reason, verr := s.validate(ctx, nodesRev)
	if verr == nil && reason == "" {
		next := written.DeepCopy()
		delete(next.Annotations, AnnotationUnvalidated)
		_, err := s.leases.Update(ctx, next, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return fmt.Errorf("%w: %s changed after this term's write: a later term fenced it", versiongate.ErrLeadershipLost, s.ref(name))
		}
		if err != nil {
			return fmt.Errorf("%w (the status stays marked unvalidated; the next write or term settles it)", s.wrap("update", name, err))
		}
		return nil
	}
	rerr := s.revert(ctx, written)
	if verr != nil {
		return fmt.Errorf("versiongate/kubestore: validating the status write: %w%s", verr, revertNote(rerr))
	}
	return fmt.Errorf("%w: %s%s", versiongate.ErrNodesChanged, reason, revertNote(rerr))
}

func revertNote(err error) string {
	if err == nil {
		return "; the write was reverted"
	}
	return fmt.Sprintf("; reverting the write failed (%v): the status stays restricted and marked unvalidated until this term writes again or the next term fences", err)
}

// validate lists the records linearizably and checks each against the
// tracker: it returns why the write conditioned on nodesRev must not
// stand, or "" if it may.
func (s *Store) validate(ctx context.Context, nodesRev int64) (string, error) {
	list, _, err := s.listRecords(ctx)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen.covered < nodesRev {
		return fmt.Sprintf("this store's listings and watches cover revision %d only, not %d", s.seen.covered, nodesRev), nil
	}
	for _, r := range list {
		if why := s.seen.check(r.id, r.uid, r.stored, nodesRev); why != "" {
			return why, nil
		}
	}
	return "", nil
}

// revert puts back the value the unvalidated write replaced, conditioned
// on the write's resourceVersion: a later term's write or Fence is never
// overwritten.
func (s *Store) revert(ctx context.Context, written *coordinationv1.Lease) error {
	next := written.DeepCopy()
	prev, ok := next.Annotations[AnnotationUnvalidated]
	if !ok {
		return nil
	}
	undo(next, prev)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), revertTimeout)
	defer cancel()
	_, err := s.leases.Update(rctx, next, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return fmt.Errorf("%s changed since the write (a later term fenced it, and undid the write)", s.ref(written.Name))
	}
	if err != nil {
		return s.wrap("update", written.Name, err)
	}
	return nil
}
