// Package election elects one leader among candidates, on etcd or on a
// Kubernetes Lease, and hands the leader a term that ends the moment
// leadership is lost.
//
// (Package documentation to be completed with the safety assumptions.)
package election
