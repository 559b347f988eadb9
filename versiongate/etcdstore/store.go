package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reconkit/reconkit/internal/etcdlease"
	"github.com/reconkit/reconkit/versiongate"
)

// cleanupTimeout bounds the revoke of a lease granted for a record that
// was not created, after the request's own context ended.
const cleanupTimeout = 2 * time.Second

// listPageSize bounds one range read of a listing, so a large cluster
// never exceeds etcd's request size limit.
const listPageSize = 1000

// Guard is implemented by a term whose validity etcd itself can check:
// Guard is a comparison that holds exactly while the term is valid (for
// reconkit's etcd election, election/etcd.Leadership: the candidate key's
// create revision equals the term's). The etcd store puts it in the If of
// every status write of such a term; other terms are fenced by their token.
type Guard interface {
	Guard() clientv3.Cmp
}

// Config configures New.
type Config struct {
	// StatusKey is where the status is stored; required, not under
	// NodesPrefix.
	StatusKey string
	// NodesPrefix is the prefix of the node records; required. A record's
	// ID is its key without the prefix.
	NodesPrefix string
	// FenceKey holds the highest fencing token that called Fence, as 20
	// decimal digits, for terms without an etcd guard; default StatusKey +
	// ".fence". It must not be under NodesPrefix.
	FenceKey string
}

// Store is the versiongate.Store on etcd. Keys are those of the client's
// keyspace, so a namespaced client (clientv3/namespace) works. Every read
// is linearizable; watches require a leader, so a watch on a member cut
// off from the others fails and is established again instead of going
// silent.
//
// A term with an etcd guard is fenced by its guard, in the write's
// transaction, when the guard's key is in this store's keyspace. When the
// election runs elsewhere (the elector on the plain client and the store
// on a namespaced one, or the two on different clusters) the guard's key
// is not visible here: Fence, finding the key absent while the term is
// live, fences that term by its token instead, as a term without a guard,
// and says so in the log.
type Store struct {
	cli *clientv3.Client
	cfg Config

	mu sync.Mutex
	// byToken is the token of the newest guarded term that Fence found
	// outside the store's keyspace and fenced by its token instead; 0 if
	// none.
	byToken uint64
}

var _ versiongate.Store = (*Store)(nil)

// New returns the Store on etcd at cli.
func New(cli *clientv3.Client, cfg Config) (*Store, error) {
	s, errs := newEtcdStore(cli, cfg)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", versiongate.ErrInvalidConfig, errors.Join(errs...))
	}
	return s, nil
}

func newEtcdStore(cli *clientv3.Client, cfg Config) (*Store, []error) {
	if cfg.FenceKey == "" && cfg.StatusKey != "" {
		cfg.FenceKey = cfg.StatusKey + ".fence"
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if cli == nil {
		bad("Client is nil")
	}
	if cfg.StatusKey == "" {
		bad("StatusKey is empty")
	}
	if cfg.NodesPrefix == "" {
		bad("NodesPrefix is empty")
	}
	if cfg.NodesPrefix != "" {
		if strings.HasPrefix(cfg.StatusKey, cfg.NodesPrefix) {
			bad("StatusKey %q is under NodesPrefix %q", cfg.StatusKey, cfg.NodesPrefix)
		}
		if strings.HasPrefix(cfg.FenceKey, cfg.NodesPrefix) {
			bad("FenceKey %q is under NodesPrefix %q", cfg.FenceKey, cfg.NodesPrefix)
		}
	}
	if cfg.FenceKey == cfg.StatusKey && cfg.StatusKey != "" {
		bad("FenceKey equals StatusKey")
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return &Store{cli: cli, cfg: cfg}, nil
}

func (s *Store) key(id string) string { return s.cfg.NodesPrefix + id }

// PublishRecord implements Store: it grants a lease and creates the record
// bound to it in one transaction that requires the key to be absent.
func (s *Store) PublishRecord(ctx context.Context, id string, value []byte, ttl time.Duration) (versiongate.RecordLease, error) {
	key := s.key(id)
	secs := int64((ttl + time.Second - 1) / time.Second)
	grant, err := s.cli.Grant(ctx, max(secs, 1))
	if err != nil {
		return versiongate.RecordLease{}, fmt.Errorf("grant lease: %w", err)
	}
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value), clientv3.WithLease(grant.ID))).
		Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		s.revoke(ctx, grant.ID)
		return versiongate.RecordLease{}, fmt.Errorf("put node record %q: %w", key, err)
	}
	if !resp.Succeeded {
		s.revoke(ctx, grant.ID)
		holder := int64(0)
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			holder = kvs[0].Lease
		}
		return versiongate.RecordLease{}, fmt.Errorf("%w: %q, lease %x", versiongate.ErrRecordHeld, key, holder)
	}
	return versiongate.RecordLease{ID: id, Lease: int64(grant.ID), TTL: time.Duration(grant.TTL) * time.Second, Revision: resp.Header.Revision}, nil
}

// KeepAlive implements Store with one keep-alive request and one
// transaction that checks the record is still bound to the lease.
func (s *Store) KeepAlive(ctx context.Context, l versiongate.RecordLease) (time.Duration, error) {
	lease := clientv3.LeaseID(l.Lease)
	ttl, err := etcdlease.KeepAliveOnce(ctx, s.cli, lease)
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return 0, fmt.Errorf("%w: lease %x expired", versiongate.ErrRecordLost, l.Lease)
		}
		return 0, fmt.Errorf("keep lease %x alive: %w", l.Lease, err)
	}
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(s.key(l.ID)), "=", lease)).Commit()
	if err != nil {
		return 0, fmt.Errorf("check node record: %w", err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("%w: the record is no longer bound to lease %x", versiongate.ErrRecordLost, l.Lease)
	}
	return ttl, nil
}

// DeleteRecord implements Store by revoking the lease.
func (s *Store) DeleteRecord(ctx context.Context, l versiongate.RecordLease) error {
	if _, err := s.cli.Revoke(ctx, clientv3.LeaseID(l.Lease)); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("revoke lease %x: %w", l.Lease, err)
	}
	return nil
}

func (s *Store) revoke(ctx context.Context, id clientv3.LeaseID) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_, _ = s.cli.Revoke(rctx, id)
}

// ListRecords implements Store: every record under the prefix, read in
// pages at one revision.
func (s *Store) ListRecords(ctx context.Context) ([]versiongate.Record, int64, error) {
	prefix := s.cfg.NodesPrefix
	end := clientv3.GetPrefixRangeEnd(prefix)
	key := prefix
	var rev int64
	var out []versiongate.Record
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(listPageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.cli.Get(ctx, key, opts...)
		if err != nil {
			return nil, 0, fmt.Errorf("list nodes under %q: %w", prefix, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			out = append(out, s.record(prefix, kv.Key, kv.Value))
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	return out, rev, nil
}

// errWatchClosed is the reason given when a watch channel closes while the
// context is still alive.
var errWatchClosed = errors.New("watch channel closed")

// WatchRecords implements Store. A watch below the compacted revision
// fails with rpctypes.ErrCompacted.
func (s *Store) WatchRecords(ctx context.Context, rev int64, fn func([]versiongate.Record, int64)) error {
	prefix := s.cfg.NodesPrefix
	// Without a leader a member serves a watch that silently stops; require
	// one so the watch fails and is re-established elsewhere.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	var batch []versiongate.Record
	for resp := range s.cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil {
			return err
		}
		if resp.Canceled {
			return errors.New("watch canceled by the server")
		}
		if len(resp.Events) == 0 {
			continue
		}
		batch = batch[:0]
		for _, ev := range resp.Events {
			r := versiongate.Record{ID: string(ev.Kv.Key[len(prefix):])}
			if ev.Type != mvccpb.DELETE {
				r = s.record(prefix, ev.Kv.Key, ev.Kv.Value)
			}
			batch = append(batch, r)
			// The response header's revision can run ahead of the events
			// delivered so far when the server splits a long backlog;
			// only the events' own revisions are known to be complete.
			rev = max(rev, ev.Kv.ModRevision)
		}
		fn(batch, rev)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errWatchClosed
}

// record is the versiongate.Record of a key that exists under prefix. An
// empty value (an operator's put of "") is corrupt, wrapping
// versiongate.ErrCorruptRecord: handed on as empty, it would read as a
// deleted record, and its node, perhaps still serving, as gone. The gate
// counts a corrupt record, like one whose value does not decode, as a
// node of unknown release that blocks every restriction
// (TestEmptyRecordIsNoDeletion).
func (s *Store) record(prefix string, key, value []byte) versiongate.Record {
	r := versiongate.Record{ID: string(key[len(prefix):]), Value: value}
	if len(value) == 0 {
		r.Value = nil
		r.Corrupt = fmt.Errorf("%w: %s is empty", versiongate.ErrCorruptRecord, key)
	}
	return r
}

// ReadStatus implements Store.
func (s *Store) ReadStatus(ctx context.Context) (versiongate.StoredStatus, error) {
	resp, err := s.cli.Get(ctx, s.cfg.StatusKey)
	if err != nil {
		return versiongate.StoredStatus{}, fmt.Errorf("get status: %w", err)
	}
	st := versiongate.StoredStatus{Revision: resp.Header.Revision}
	if len(resp.Kvs) == 1 {
		st.Value = resp.Kvs[0].Value
	}
	return st, nil
}

// WatchStatus implements Store.
func (s *Store) WatchStatus(ctx context.Context, rev int64, fn func(versiongate.StoredStatus) bool) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range s.cli.Watch(wctx, s.cfg.StatusKey, clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil {
			return err
		}
		if resp.Canceled {
			return errors.New("watch canceled by the server")
		}
		if n := len(resp.Events); n > 0 {
			// Only the newest value of the key matters.
			ev := resp.Events[n-1]
			st := versiongate.StoredStatus{Revision: ev.Kv.ModRevision}
			if ev.Type == clientv3.EventTypePut {
				st.Value = ev.Kv.Value
			}
			if fn(st) {
				return nil
			}
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errWatchClosed
}

// encodeToken is the fence key's value: fixed width, so that etcd's
// byte-wise comparison orders tokens numerically.
func encodeToken(t uint64) string { return fmt.Sprintf("%020d", t) }

// Fence implements Store. For a term with an etcd guard it checks the
// guard; for any other term, and for a guarded term whose guard key this
// store cannot see (see Store), it raises the fence key to the term's
// token unless a higher one is stored, in one transaction.
func (s *Store) Fence(ctx context.Context, t versiongate.Term) error {
	if g, ok := t.(Guard); ok {
		cmp := g.Guard()
		resp, err := s.cli.Txn(ctx).If(cmp).Else(clientv3.OpGet(string(cmp.KeyBytes()), clientv3.WithKeysOnly())).Commit()
		if err != nil {
			return fmt.Errorf("check term: %w", err)
		}
		if resp.Succeeded {
			return nil
		}
		ended := fmt.Errorf("%w: term %d has ended in etcd", versiongate.ErrLeadershipLost, t.Token())
		if len(resp.Responses[0].GetResponseRange().GetKvs()) > 0 {
			return ended
		}
		foreign, err := s.guardOutsideKeyspace(ctx, cmp, t.Context().Err() == nil)
		if err != nil {
			return fmt.Errorf("check term: %w", err)
		}
		if !foreign {
			return ended
		}
		// The candidate key was never in this store's keyspace: its election
		// runs on another keyspace (a namespaced client on one side) or
		// another cluster, where etcd cannot compare it in this store's
		// transactions. Its token fences it instead.
		logr.FromContextOrDiscard(ctx).Info("The term's etcd guard is outside this store's keyspace (election on another keyspace or cluster); fencing the term by its token",
			"token", t.Token(), "guardKey", string(cmp.KeyBytes()), "fenceKey", s.cfg.FenceKey)
		if err := s.fenceToken(ctx, t.Token()); err != nil {
			return err
		}
		s.mu.Lock()
		s.byToken = t.Token()
		s.mu.Unlock()
		return nil
	}
	return s.fenceToken(ctx, t.Token())
}

// guardOutsideKeyspace reports whether the key of a guard that failed was
// never in this store's keyspace. A guard of the form "create revision of
// key = rev" (election/etcd's) is judged by history: in the election's own
// keyspace the key existed at revision rev, created there, so a read at
// rev that does not find it (or a revision this cluster has not reached)
// proves the keyspace is another. Only when that history is compacted, or
// for another form of guard, is the guard judged outside while its term's
// context is still live.
func (s *Store) guardOutsideKeyspace(ctx context.Context, guard clientv3.Cmp, live bool) (bool, error) {
	c := guard.GetCompare()
	key := string(c.GetKey())
	if c.GetTarget() == etcdserverpb.Compare_CREATE && c.GetResult() == etcdserverpb.Compare_EQUAL {
		rev := c.GetCreateRevision()
		resp, err := s.cli.Get(ctx, key, clientv3.WithRev(rev), clientv3.WithKeysOnly())
		switch {
		case err == nil:
			return len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != rev, nil
		case errors.Is(err, rpctypes.ErrFutureRev):
			return true, nil
		case !errors.Is(err, rpctypes.ErrCompacted):
			return false, err
		}
	}
	return live, nil
}

// fencedByToken reports whether the guarded term of token tok fenced this
// store by its token, its guard being outside the store's keyspace.
func (s *Store) fencedByToken(tok uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byToken != 0 && s.byToken == tok
}

// fenceToken raises the fence key to tok unless a higher token is stored.
func (s *Store) fenceToken(ctx context.Context, tok uint64) error {
	if tok == 0 || tok == ^uint64(0) {
		return fmt.Errorf("versiongate: fence: token %d out of range", tok)
	}
	fk := s.cfg.FenceKey
	put := clientv3.OpPut(fk, encodeToken(tok))
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(fk), "=", 0)).
		Then(put).
		Else(clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Value(fk), "<", encodeToken(tok+1))},
			[]clientv3.Op{put},
			[]clientv3.Op{clientv3.OpGet(fk)},
		)).
		Commit()
	if err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	if resp.Succeeded {
		return nil
	}
	inner := resp.Responses[0].GetResponseTxn()
	if inner.GetSucceeded() {
		return nil
	}
	var stored uint64
	if rr := inner.GetResponses(); len(rr) > 0 {
		if kvs := rr[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			stored, _ = strconv.ParseUint(string(kvs[0].Value), 10, 64)
		}
	}
	return &versiongate.FencedOffError{
		Fence:  fmt.Sprintf("the fence key %q", fk),
		Stored: stored,
		Token:  tok,
		Clear:  fmt.Sprintf("delete the key (etcdctl del %s, with the store client's namespace prefix if it has one), and the next term fences the store anew", fk),
	}
}

// WriteStatus implements Store in one transaction: the term's guard (or
// the fence key holding at most its token) in the outer If, the nodes
// prefix's mod revision in the inner one, so that the two failures are
// told apart without another request.
func (s *Store) WriteStatus(ctx context.Context, t versiongate.Term, value []byte, nodesRev int64) error {
	var termCmp clientv3.Cmp
	if g, ok := t.(Guard); ok && !s.fencedByToken(t.Token()) {
		termCmp = g.Guard()
	} else {
		tok := t.Token()
		if tok == 0 || tok == ^uint64(0) {
			return fmt.Errorf("versiongate: write status: token %d out of range", tok)
		}
		// An absent fence key fails the comparison: a term that did not
		// fence cannot write.
		termCmp = clientv3.Compare(clientv3.Value(s.cfg.FenceKey), "<", encodeToken(tok+1))
	}
	var nodesCmps []clientv3.Cmp
	if nodesRev > 0 {
		end := clientv3.GetPrefixRangeEnd(s.cfg.NodesPrefix)
		nodesCmps = append(nodesCmps, clientv3.Compare(clientv3.ModRevision(s.cfg.NodesPrefix).WithRange(end), "<", nodesRev+1))
	}
	resp, err := s.cli.Txn(ctx).If(termCmp).
		Then(clientv3.OpTxn(nodesCmps, []clientv3.Op{clientv3.OpPut(s.cfg.StatusKey, string(value))}, nil)).
		Commit()
	if err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: status not written (token %s)", versiongate.ErrLeadershipLost, strconv.FormatUint(t.Token(), 10))
	}
	if !resp.Responses[0].GetResponseTxn().GetSucceeded() {
		return fmt.Errorf("%w: status not written (nodes revision %d)", versiongate.ErrNodesChanged, nodesRev)
	}
	return nil
}
