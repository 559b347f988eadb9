package kubefake

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// allowsUnconditionalUpdate reports whether the resource's registry
// strategy accepts an update without a resourceVersion. Those listed here
// refuse one (AllowUnconditionalUpdate false in Kubernetes 1.37's
// pkg/registry/*/strategy.go): a PUT there must name the version it
// replaces. Most resources, among them configmaps, secrets, nodes and
// pods, accept it.
func allowsUnconditionalUpdate(gr schema.GroupResource) bool {
	switch gr.Group {
	case "coordination.k8s.io":
		return gr.Resource != "leases" && gr.Resource != "leasecandidates"
	case "policy":
		return gr.Resource != "poddisruptionbudgets"
	case "storage.k8s.io":
		switch gr.Resource {
		case "csidrivers", "csinodes", "csistoragecapacities", "volumeattachments":
			return false
		}
	case "node.k8s.io":
		return gr.Resource != "runtimeclasses"
	case "certificates.k8s.io":
		return gr.Resource != "clustertrustbundles" && gr.Resource != "podcertificaterequests"
	case "admissionregistration.k8s.io", "internal.apiserver.k8s.io":
		return false
	}
	return true
}

// mustSpecifyResourceVersion is the apiserver's answer to an update
// without a resourceVersion where the resource refuses one: 422, with the
// resource where the kind belongs, as the generic registry writes it.
func mustSpecifyResourceVersion(gr schema.GroupResource, name string) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: gr.Resource}, name, field.ErrorList{
		field.Invalid(field.NewPath("metadata", "resourceVersion"), uint64(0), "must be specified for an update"),
	})
}
