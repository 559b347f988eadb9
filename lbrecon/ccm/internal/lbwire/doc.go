// Package lbwire carries k8s.io/cloud-provider's LoadBalancer calls from
// one process to another over HTTP and JSON: [Client] is a
// cloudprovider.LoadBalancer that forwards every call, [Handler] serves
// them from a cloudprovider.LoadBalancer.
//
// It lets ccmtest run k8s.io/cloud-provider's service controller in a
// process of its own, built without the race detector (the controller has
// a data race of its own), while the load balancer it drives runs in the
// test process, under the race detector, against the provider model the
// test checks. Killing that process is a real crash of the controller.
//
// Each call is one POST of a [Request] to /<verb> whose answer is a
// [Response]. The request's context ends when the caller's connection
// does, so the calls of a killed process end. An api.RetryError keeps its
// RetryAfter across the wire; every other error arrives as its message.
package lbwire
