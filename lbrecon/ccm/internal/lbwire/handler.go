package lbwire

import (
	"encoding/json"
	"errors"
	"net/http"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
)

// Handler serves the calls a [Client] forwards from lb. Each call runs in
// its request's context.
func Handler(lb cloudprovider.LoadBalancer) http.Handler {
	return handler{lb: lb}
}

type handler struct{ lb cloudprovider.LoadBalancer }

func (h handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "lbwire: POST only", http.StatusMethodNotAllowed)
		return
	}
	var req Request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Service == nil {
		http.Error(w, "lbwire: a request with a service is required", http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	var res Response
	var err error
	switch r.URL.Path {
	case PathGet:
		res.Status, res.Exists, err = h.lb.GetLoadBalancer(ctx, req.Cluster, req.Service)
	case PathName:
		res.Name = h.lb.GetLoadBalancerName(ctx, req.Cluster, req.Service)
	case PathEnsure:
		res.Status, err = h.lb.EnsureLoadBalancer(ctx, req.Cluster, req.Service, req.Nodes)
	case PathUpdate:
		err = h.lb.UpdateLoadBalancer(ctx, req.Cluster, req.Service, req.Nodes)
	case PathDelete:
		err = h.lb.EnsureLoadBalancerDeleted(ctx, req.Cluster, req.Service)
	default:
		http.NotFound(w, r)
		return
	}
	if err != nil {
		res.Error = err.Error()
		var re *api.RetryError
		if errors.As(err, &re) {
			res.Retry, res.RetryAfter = true, re.RetryAfter()
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&res) // a caller gone is the only failure
}
