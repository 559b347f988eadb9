package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/lbrecon"
)

// The ConfigMap that assigns every agent its configuration.
const (
	configMapName = "nodeagent-config"
	configMapKey  = "config.json"
)

// agentConfig is an agent's configuration: what the leader puts on the load
// balancer, and how much load the agent accepts.
type agentConfig struct {
	// LoadBalancer is the load balancer's ID.
	LoadBalancer string `json:"loadBalancer"`
	// Addresses are the load balancer's external addresses.
	Addresses []string `json:"externalAddresses"`
	// Ports are forwarded from every external address to every live node.
	Ports []portConfig `json:"ports"`
	// MaxConnections is how many connections an agent accepts; below the
	// agent's load it sheds traffic, which the trial probe catches.
	MaxConnections int `json:"maxConnections"`
}

type portConfig struct {
	Name         string `json:"name"`
	NodePort     uint16 `json:"nodePort"`
	ExternalPort uint16 `json:"externalPort"`
}

// localConfig is what an agent runs when nothing is assigned.
func localConfig() agentConfig {
	return agentConfig{
		LoadBalancer:   "lb-1",
		Addresses:      []string{"192.0.2.10"},
		Ports:          []portConfig{{Name: "http", NodePort: 30080, ExternalPort: 80}},
		MaxConnections: 100,
	}
}

// parseConfig decodes a payload strictly: unknown fields are errors.
func parseConfig(b []byte) (agentConfig, error) {
	var c agentConfig
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return agentConfig{}, fmt.Errorf("decode: %w", err)
	}
	return c, nil
}

// validateConfig checks c, including the load balancer it describes.
func validateConfig(c agentConfig) error {
	var errs []error
	if c.MaxConnections < 1 {
		errs = append(errs, fmt.Errorf("maxConnections %d must be at least 1", c.MaxConnections))
	}
	for _, p := range c.Ports {
		if p.NodePort < 30000 || p.NodePort > 32767 {
			errs = append(errs, fmt.Errorf("port %q: nodePort %d is outside 30000-32767", p.Name, p.NodePort))
		}
	}
	if len(c.Ports) == 0 {
		errs = append(errs, errors.New("no ports"))
	}
	if _, err := c.loadBalancer(nil, nil); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// loadBalancer is the load balancer the configuration describes, with
// extra ports (from the release) and the given targets.
func (c agentConfig) loadBalancer(extra []portConfig, targets []lbrecon.Target) (lbrecon.LoadBalancer, error) {
	lb := lbrecon.LoadBalancer{ID: c.LoadBalancer, Suffix: "nodeagent", Targets: targets}
	for _, p := range append(append([]portConfig(nil), c.Ports...), extra...) {
		lb.Ports = append(lb.Ports, lbrecon.Port{Name: p.Name, NodePort: p.NodePort, ExternalPort: p.ExternalPort})
	}
	for _, a := range c.Addresses {
		addr, err := netip.ParseAddr(a)
		if err != nil {
			return lbrecon.LoadBalancer{}, fmt.Errorf("external address %q: %w", a, err)
		}
		lb.Addresses = append(lb.Addresses, addr)
	}
	if err := lb.Validate(); err != nil {
		return lbrecon.LoadBalancer{}, err
	}
	return lb, nil
}

// configAssigner writes the nodeagent-config ConfigMap, as an operator
// would.
type configAssigner struct {
	client    kubernetes.Interface
	namespace string

	mu sync.Mutex
}

// assign writes payload and returns the checkpoint ID the agents will see:
// the ConfigMap's UID and resourceVersion, or the payload's hash where the
// API keeps neither (the in-memory API).
func (a *configAssigner) assign(ctx context.Context, payload string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cms := a.client.CoreV1().ConfigMaps(a.namespace)
	cm, err := cms.Get(ctx, configMapName, metav1.GetOptions{})
	notFound := apierrors.IsNotFound(err)
	if err != nil && !notFound {
		return "", fmt.Errorf("get configmap: %w", err)
	}
	if notFound {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configMapName, Namespace: a.namespace}}
	}
	cm.Data = map[string]string{configMapKey: payload}
	if notFound {
		cm, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	} else {
		cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return "", fmt.Errorf("write configmap: %w", err)
	}
	if cm.UID == "" || cm.ResourceVersion == "" {
		return checkpoint.HashID([]byte(payload)), nil
	}
	return string(cm.UID) + "_" + cm.ResourceVersion, nil
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called on the package's own types
	}
	return string(b)
}
