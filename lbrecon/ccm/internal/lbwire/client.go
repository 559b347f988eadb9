package lbwire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
)

// Client is a cloudprovider.LoadBalancer that forwards every call to a
// [Handler] at URL.
type Client struct {
	// URL is the handler's base URL, such as "http://127.0.0.1:8080".
	URL string
	// HTTP is the client the calls go through; nil means
	// http.DefaultClient.
	HTTP *http.Client
}

var _ cloudprovider.LoadBalancer = (*Client)(nil)

// GetLoadBalancer implements cloudprovider.LoadBalancer.
func (c *Client) GetLoadBalancer(ctx context.Context, cluster string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	res, err := c.call(ctx, PathGet, Request{Cluster: cluster, Service: svc})
	return res.Status, res.Exists, err
}

// GetLoadBalancerName implements cloudprovider.LoadBalancer. It falls back
// to cloudprovider.DefaultLoadBalancerName when the call fails: the
// method has no error to return.
func (c *Client) GetLoadBalancerName(ctx context.Context, cluster string, svc *v1.Service) string {
	res, err := c.call(ctx, PathName, Request{Cluster: cluster, Service: svc})
	if err != nil {
		return cloudprovider.DefaultLoadBalancerName(svc)
	}
	return res.Name
}

// EnsureLoadBalancer implements cloudprovider.LoadBalancer.
func (c *Client) EnsureLoadBalancer(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	res, err := c.call(ctx, PathEnsure, Request{Cluster: cluster, Service: svc, Nodes: nodes})
	return res.Status, err
}

// UpdateLoadBalancer implements cloudprovider.LoadBalancer.
func (c *Client) UpdateLoadBalancer(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) error {
	_, err := c.call(ctx, PathUpdate, Request{Cluster: cluster, Service: svc, Nodes: nodes})
	return err
}

// EnsureLoadBalancerDeleted implements cloudprovider.LoadBalancer.
func (c *Client) EnsureLoadBalancerDeleted(ctx context.Context, cluster string, svc *v1.Service) error {
	_, err := c.call(ctx, PathDelete, Request{Cluster: cluster, Service: svc})
	return err
}

// call posts req to path and returns the response, its error rebuilt: an
// api.RetryError when it was one, otherwise an error with its message.
func (c *Client) call(ctx context.Context, path string, req Request) (Response, error) {
	body, err := json.Marshal(&req)
	if err != nil {
		return Response{}, fmt.Errorf("lbwire: %s: encoding the request: %w", path, err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL+path, bytes.NewReader(body))
	if err != nil {
		return Response{}, fmt.Errorf("lbwire: %s: %w", path, err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(hr)
	if err != nil {
		return Response{}, fmt.Errorf("lbwire: %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return Response{}, fmt.Errorf("lbwire: %s: %s: %s", path, resp.Status, bytes.TrimSpace(msg))
	}
	var res Response
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return Response{}, fmt.Errorf("lbwire: %s: decoding the response: %w", path, err)
	}
	switch {
	case res.Error == "":
		return res, nil
	case res.Retry:
		return res, api.NewRetryError(res.Error, res.RetryAfter)
	default:
		return res, errors.New(res.Error)
	}
}
