package lbwire

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// The verbs: the path of each LoadBalancer method's call.
const (
	PathGet    = "/get"
	PathName   = "/name"
	PathEnsure = "/ensure"
	PathUpdate = "/update"
	PathDelete = "/delete"
)

// Request is one LoadBalancer call's arguments.
type Request struct {
	Cluster string      `json:"cluster"`
	Service *v1.Service `json:"service"`
	Nodes   []*v1.Node  `json:"nodes,omitempty"`
}

// Response is one LoadBalancer call's results.
type Response struct {
	Status *v1.LoadBalancerStatus `json:"status,omitempty"`
	Exists bool                   `json:"exists,omitempty"`
	Name   string                 `json:"name,omitempty"`
	// Error is the error's message; empty means none.
	Error string `json:"error,omitempty"`
	// Retry is true when the error is an api.RetryError, to be retried
	// after RetryAfter.
	Retry      bool          `json:"retry,omitempty"`
	RetryAfter time.Duration `json:"retryAfter,omitempty"`
}
