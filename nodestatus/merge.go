package nodestatus

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// overlay lays the provider's node n over base, the Node of Config.Node,
// and returns the node the controller then wants. The rule (see
// NodeProvider): nothing set in base is dropped by a notification; the
// provider's value wins wherever both set one.
//
//   - Labels and annotations: union, by key.
//   - Spec: taints union, by key and effect; podCIDR(s), providerID,
//     unschedulable and externalID are the provider's when set, else
//     base's; the deprecated configSource is base's.
//   - Status: conditions union, by type; addresses: the provider's
//     addresses of a type replace base's of that type, base's of other
//     types stay; capacity and allocatable union, by resource; nodeInfo
//     and daemonEndpoints field by field, the provider's where not empty
//     (the deprecated kubeProxyVersion is base's);
//     images, volumes, runtime handlers, features and config: the
//     provider's when set, else base's.
//
// base and n are not modified.
func overlay(base, n *corev1.Node) *corev1.Node {
	out := base.DeepCopy()
	n = n.DeepCopy()
	out.Labels = union(out.Labels, n.Labels)
	out.Annotations = union(out.Annotations, n.Annotations)

	bs, ns := &out.Spec, &n.Spec
	for _, t := range ns.Taints {
		bs.Taints = slices.DeleteFunc(bs.Taints, func(b corev1.Taint) bool { return b.Key == t.Key && b.Effect == t.Effect })
	}
	bs.Taints = append(bs.Taints, ns.Taints...)
	if len(bs.Taints) == 0 {
		bs.Taints = nil
	}
	if ns.PodCIDR != "" {
		bs.PodCIDR = ns.PodCIDR
	}
	if len(ns.PodCIDRs) > 0 {
		bs.PodCIDRs = ns.PodCIDRs
	}
	if ns.ProviderID != "" {
		bs.ProviderID = ns.ProviderID
	}
	bs.Unschedulable = bs.Unschedulable || ns.Unschedulable
	if ns.DoNotUseExternalID != "" {
		bs.DoNotUseExternalID = ns.DoNotUseExternalID
	}

	st, nst := &out.Status, &n.Status
	for _, c := range nst.Conditions {
		st.Conditions = slices.DeleteFunc(st.Conditions, func(b corev1.NodeCondition) bool { return b.Type == c.Type })
	}
	st.Conditions = append(st.Conditions, nst.Conditions...)
	for _, a := range nst.Addresses {
		st.Addresses = slices.DeleteFunc(st.Addresses, func(b corev1.NodeAddress) bool { return b.Type == a.Type })
	}
	// The provider's first, in its order: the first InternalIP is the
	// node's primary address.
	st.Addresses = append(nst.Addresses, st.Addresses...)
	st.Capacity = unionResources(st.Capacity, nst.Capacity)
	st.Allocatable = unionResources(st.Allocatable, nst.Allocatable)
	overlayInfo(&st.NodeInfo, nst.NodeInfo)
	if p := nst.DaemonEndpoints.KubeletEndpoint.Port; p != 0 {
		st.DaemonEndpoints.KubeletEndpoint.Port = p
	}
	if nst.Phase != "" {
		st.Phase = nst.Phase
	}
	if len(nst.Images) > 0 {
		st.Images = nst.Images
	}
	if len(nst.VolumesInUse) > 0 {
		st.VolumesInUse = nst.VolumesInUse
	}
	if len(nst.VolumesAttached) > 0 {
		st.VolumesAttached = nst.VolumesAttached
	}
	if nst.Config != nil {
		st.Config = nst.Config
	}
	if len(nst.RuntimeHandlers) > 0 {
		st.RuntimeHandlers = nst.RuntimeHandlers
	}
	if nst.Features != nil {
		st.Features = nst.Features
	}
	if nst.DeclaredFeatures != nil {
		st.DeclaredFeatures = nst.DeclaredFeatures
	}
	return out
}

func union(base, n map[string]string) map[string]string {
	if len(base) == 0 && len(n) == 0 {
		return nil
	}
	out := maps.Clone(base)
	if out == nil {
		out = make(map[string]string, len(n))
	}
	maps.Copy(out, n)
	return out
}

func unionResources(base, n corev1.ResourceList) corev1.ResourceList {
	if len(n) == 0 {
		return base
	}
	if base == nil {
		return n
	}
	maps.Copy(base, n)
	return base
}

func overlayInfo(b *corev1.NodeSystemInfo, n corev1.NodeSystemInfo) {
	for _, f := range []struct {
		dst *string
		src string
	}{
		{&b.MachineID, n.MachineID}, {&b.SystemUUID, n.SystemUUID}, {&b.BootID, n.BootID},
		{&b.KernelVersion, n.KernelVersion}, {&b.OSImage, n.OSImage},
		{&b.ContainerRuntimeVersion, n.ContainerRuntimeVersion}, {&b.KubeletVersion, n.KubeletVersion},
		{&b.OperatingSystem, n.OperatingSystem},
		{&b.Architecture, n.Architecture},
	} {
		if f.src != "" {
			*f.dst = f.src
		}
	}
	if n.Swap != nil {
		b.Swap = n.Swap
	}
	if n.RunningInUserNamespace != nil {
		b.RunningInUserNamespace = n.RunningInUserNamespace
	}
}
