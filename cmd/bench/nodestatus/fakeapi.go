package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// fakeAPI is an in-memory API server for Nodes and Leases behind an
// http.RoundTripper: it keeps resourceVersions (a stale write gets 409),
// applies strategic merge patches, and counts every request by verb and
// resource. It is what the controllers' shared client talks to.
type fakeAPI struct {
	rv     atomic.Int64
	shards [64]shard
	counts sync.Map // "VERB resource" -> *atomic.Int64

	// onLeasePut, if set, is called after each successful lease update.
	onLeasePut func(name string)
}

type shard struct {
	mu     sync.Mutex
	nodes  map[string][]byte
	leases map[string][]byte
}

func newFakeAPI() *fakeAPI {
	f := &fakeAPI{}
	for i := range f.shards {
		f.shards[i].nodes = map[string][]byte{}
		f.shards[i].leases = map[string][]byte{}
	}
	return f
}

func (f *fakeAPI) shard(name string) *shard {
	var h uint32 = 2166136261
	for i := 0; i < len(name); i++ {
		h = (h ^ uint32(name[i])) * 16777619
	}
	return &f.shards[h%uint32(len(f.shards))]
}

func (f *fakeAPI) count(key string) {
	c, ok := f.counts.Load(key)
	if !ok {
		c, _ = f.counts.LoadOrStore(key, new(atomic.Int64))
	}
	c.(*atomic.Int64).Add(1)
}

// snapshot returns the counts so far.
func (f *fakeAPI) snapshot() map[string]int64 {
	m := map[string]int64{}
	f.counts.Range(func(k, v any) bool {
		m[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return m
}

// storeBytes is the size of everything the fake server stores.
func (f *fakeAPI) storeBytes() int {
	n := 0
	for i := range f.shards {
		s := &f.shards[i]
		s.mu.Lock()
		for _, b := range s.nodes {
			n += len(b)
		}
		for _, b := range s.leases {
			n += len(b)
		}
		s.mu.Unlock()
	}
	return n
}

func (f *fakeAPI) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	path := req.URL.Path
	switch {
	case strings.HasPrefix(path, "/api/v1/nodes"):
		rest := strings.TrimPrefix(strings.TrimPrefix(path, "/api/v1/nodes"), "/")
		name, sub, _ := strings.Cut(rest, "/")
		res := "nodes"
		if sub != "" {
			res += "/" + sub
		}
		f.count(req.Method + " " + res)
		return f.node(req, name, body)
	case strings.HasPrefix(path, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"):
		name := strings.TrimPrefix(strings.TrimPrefix(path, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"), "/")
		f.count(req.Method + " leases")
		return f.lease(req, name, body)
	}
	f.count(req.Method + " other")
	return status(req, http.StatusNotFound, metav1.StatusReasonNotFound, "", "", "the server could not find the requested resource"), nil
}

func (f *fakeAPI) nextRV() string { return strconv.FormatInt(f.rv.Add(1), 10) }

func (f *fakeAPI) node(req *http.Request, name string, body []byte) (*http.Response, error) {
	if req.Method == http.MethodPost {
		var n corev1.Node
		if err := json.Unmarshal(body, &n); err != nil {
			return status(req, 400, metav1.StatusReasonBadRequest, "", "", err.Error()), nil
		}
		name = n.Name
	}
	s := f.shard(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.nodes[name]
	switch req.Method {
	case http.MethodGet:
		if !ok {
			return status(req, 404, metav1.StatusReasonNotFound, "nodes", name, "not found"), nil
		}
		return respond(req, 200, cur), nil
	case http.MethodPost:
		if ok {
			return status(req, 409, metav1.StatusReasonAlreadyExists, "nodes", name, "already exists"), nil
		}
		var n corev1.Node
		_ = json.Unmarshal(body, &n)
		n.ResourceVersion, n.UID = f.nextRV(), types.UID("uid-"+name+"-"+f.nextRV())
		n.CreationTimestamp = metav1.Now()
		b, _ := json.Marshal(&n)
		s.nodes[name] = b
		return respond(req, 201, b), nil
	case http.MethodPatch:
		if !ok {
			return status(req, 404, metav1.StatusReasonNotFound, "nodes", name, "not found"), nil
		}
		var pre struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(body, &pre)
		var old corev1.Node
		_ = json.Unmarshal(cur, &old)
		if pre.Metadata.ResourceVersion != "" && pre.Metadata.ResourceVersion != old.ResourceVersion {
			return status(req, 409, metav1.StatusReasonConflict, "nodes", name, "the object has been modified"), nil
		}
		out, err := strategicpatch.StrategicMergePatch(cur, body, corev1.Node{})
		if err != nil {
			return status(req, 422, metav1.StatusReasonInvalid, "nodes", name, err.Error()), nil
		}
		var n corev1.Node
		if err := json.Unmarshal(out, &n); err != nil {
			return status(req, 422, metav1.StatusReasonInvalid, "nodes", name, err.Error()), nil
		}
		n.ResourceVersion, n.UID = f.nextRV(), old.UID
		b, _ := json.Marshal(&n)
		s.nodes[name] = b
		return respond(req, 200, b), nil
	}
	return status(req, 405, metav1.StatusReasonMethodNotAllowed, "nodes", name, "method not allowed"), nil
}

func (f *fakeAPI) lease(req *http.Request, name string, body []byte) (*http.Response, error) {
	if req.Method == http.MethodPost {
		var l coordinationv1.Lease
		if err := json.Unmarshal(body, &l); err != nil {
			return status(req, 400, metav1.StatusReasonBadRequest, "", "", err.Error()), nil
		}
		name = l.Name
	}
	s := f.shard(name)
	s.mu.Lock()
	cur, ok := s.leases[name]
	switch req.Method {
	case http.MethodGet:
		s.mu.Unlock()
		if !ok {
			return status(req, 404, metav1.StatusReasonNotFound, "leases", name, "not found"), nil
		}
		return respond(req, 200, cur), nil
	case http.MethodDelete:
		delete(s.leases, name)
		s.mu.Unlock()
		return status(req, 200, "", "leases", name, "deleted"), nil
	case http.MethodPost, http.MethodPut:
		var l coordinationv1.Lease
		_ = json.Unmarshal(body, &l)
		if req.Method == http.MethodPost && ok {
			s.mu.Unlock()
			return status(req, 409, metav1.StatusReasonAlreadyExists, "leases", name, "already exists"), nil
		}
		if req.Method == http.MethodPut {
			var old coordinationv1.Lease
			if ok {
				_ = json.Unmarshal(cur, &old)
			}
			if !ok || l.ResourceVersion != old.ResourceVersion {
				s.mu.Unlock()
				return status(req, 409, metav1.StatusReasonConflict, "leases", name, "the object has been modified"), nil
			}
			l.UID = old.UID
		} else {
			l.UID = types.UID("lease-uid-" + f.nextRV())
		}
		l.ResourceVersion = f.nextRV()
		b, _ := json.Marshal(&l)
		s.leases[name] = b
		s.mu.Unlock()
		if req.Method == http.MethodPut && f.onLeasePut != nil {
			f.onLeasePut(name)
		}
		code := 200
		if req.Method == http.MethodPost {
			code = 201
		}
		return respond(req, code, b), nil
	}
	s.mu.Unlock()
	return status(req, 405, metav1.StatusReasonMethodNotAllowed, "leases", name, "method not allowed"), nil
}

func respond(req *http.Request, code int, body []byte) *http.Response {
	return &http.Response{
		StatusCode:    code,
		Status:        fmt.Sprintf("%d %s", code, http.StatusText(code)),
		Header:        http.Header{"Content-Type": []string{"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
		Proto:         "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}
}

func status(req *http.Request, code int, reason metav1.StatusReason, kind, name, msg string) *http.Response {
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg,
	}
	if code < 300 {
		st.Status = metav1.StatusSuccess
	}
	if name != "" {
		st.Details = &metav1.StatusDetails{Name: name, Kind: kind}
	}
	b, _ := json.Marshal(&st)
	return respond(req, code, b)
}
