// Package kubestore is versiongate's Store on the Kubernetes API alone:
// node records and the status are coordination.k8s.io/v1 Leases in one
// namespace, every write carries a resourceVersion precondition, and every
// read a decision rests on is linearizable (GET or LIST with
// resourceVersion unset, never "0", never an informer cache). It compiles
// no etcd client and no gRPC.
//
// [New] builds a [Store] from a client, a namespace and a gate name:
//   - each node's record is the Lease <gate>-<nodeID>, labelled
//     reconkit.io/gate=<gate> and reconkit.io/role=record, its value in the
//     annotation reconkit.io/value, with holderIdentity,
//     leaseDurationSeconds and renewTime set;
//   - the status is the Lease <gate>-status (role=status): its value in
//     reconkit.io/value, the fencing term in reconkit.io/term, and the
//     finalizer reconkit.io/versiongate-status.
//
// Revisions are the Leases' resourceVersions, one counter for records and
// status alike since they are the same resource.
//
// The client needs get, list, watch, create, update and delete on
// leases.coordination.k8s.io in the namespace; an error for a missing
// permission names the verb, and one for a server without the API says so.
package kubestore
