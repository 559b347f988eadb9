// Package kubefake is client-go's fake clientset with the apiserver's
// optimistic concurrency: resourceVersions that change on every write and
// preconditions that are enforced.
//
// client-go's fake clientset (k8s.io/client-go/kubernetes/fake) keeps no
// resourceVersion on the objects it stores: an Update from a stale read
// succeeds where the apiserver answers 409 Conflict. Two Lease candidates
// on it can both take the same Lease and both lead, and a compare-and-swap
// store passes its tests with or without its compare. [NewClientset]
// returns that same clientset, so every typed client, reactor and tracker
// call works as before, with reactors in front of its tracker that model:
//   - one resourceVersion counter across all resources, raised by every
//     create, update, patch and delete, as etcd's revision is; uid and
//     creationTimestamp set on create (from [Config.Clock]);
//   - Update carrying a resourceVersion other than the stored one: 409
//     Conflict (an empty one is an unconditional update, as for most
//     built-in resources); Create carrying one: 400;
//   - merge and strategic merge patches that set metadata.resourceVersion,
//     and JSON patches that test it: the precondition is checked on the
//     patched object, as the apiserver does (409, or 422 for a failed
//     test operation); server-side apply is the tracker's, without a
//     precondition;
//   - Delete with Preconditions (resourceVersion, uid): 409 on mismatch;
//   - finalizers: deleting an object that has some sets its
//     deletionTimestamp; the write that removes the last one deletes it;
//   - List returns the current resourceVersion in its ListMeta, and
//     applies field selectors on metadata.name and metadata.namespace
//     (client-go's typed fakes apply label selectors only);
//   - Watch from a resourceVersion replays every change after it, in order,
//     with label and field (metadata.name, metadata.namespace) selectors
//     applied; a watch from before the kept history ([Config.WatchHistory])
//     fails with 410 Gone; a DELETED event carries the deletion's own
//     resourceVersion; a slow reader never blocks writers.
//
// What it does not model, and where tests need a real apiserver
// (internal/testenv in this repository) instead: admission, validation and
// defaulting; the status subresource's separation (an update of the main
// resource may change status, as on client-go's fake); generation;
// resourceVersion "0" or cached reads (every read is linearizable here);
// watch bookmarks and initial events; a watch ending by itself (prepend a
// watch reactor to inject one); list pagination; and the latency, lag and
// timeouts of a real server (prepend reactors to inject them). A watch's
// goroutine runs until the watch is stopped.
package kubefake
