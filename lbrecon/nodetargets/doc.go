// Package nodetargets turns Kubernetes Nodes into lbrecon targets.
//
// It is a subpackage so that lbrecon itself compiles no Kubernetes API
// types: a host on etcd alone imports lbrecon without them. Which Nodes
// are healthy enough to take traffic is nodestatus's rule
// (nodestatus.NodeHealth); a host passes the Nodes that rule keeps:
//
//	nodes, err := health.List(ctx, kube, metav1.ListOptions{LabelSelector: "pool=edge"})
//	lb.Targets = nodetargets.From(nodes, corev1.NodeInternalIP)
package nodetargets
