package kubefake

import (
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// selectable returns the field selector labels the apiserver (1.37)
// accepts for the resources that register their own
// (pkg/apis/*/v1/conversion.go), and false for every other resource,
// which accepts metadata.name and metadata.namespace only.
func selectable(gr schema.GroupResource) ([]string, bool) {
	switch gr {
	case schema.GroupResource{Resource: "pods"}:
		return []string{"metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy",
			"spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
			"status.podIP", "status.podIPs", "status.nominatedNodeName"}, true
	case schema.GroupResource{Resource: "nodes"}:
		return []string{"metadata.name", "spec.unschedulable"}, true
	case schema.GroupResource{Resource: "replicationcontrollers"}:
		return []string{"metadata.name", "metadata.namespace", "status.replicas"}, true
	case schema.GroupResource{Resource: "events"}:
		return []string{"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
			"involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
			"involvedObject.fieldPath", "reason", "reportingComponent", "source", "type",
			"metadata.namespace", "metadata.name"}, true
	case schema.GroupResource{Resource: "namespaces"}:
		return []string{"status.phase", "metadata.name"}, true
	case schema.GroupResource{Resource: "secrets"}:
		return []string{"type", "metadata.namespace", "metadata.name"}, true
	case schema.GroupResource{Resource: "services"}:
		return []string{"metadata.namespace", "metadata.name", "spec.clusterIP", "spec.type"}, true
	case schema.GroupResource{Group: "batch", Resource: "jobs"}:
		return []string{"metadata.name", "metadata.namespace", "status.successful"}, true
	case schema.GroupResource{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}:
		return []string{"metadata.name", "spec.signerName"}, true
	}
	return []string{"metadata.name", "metadata.namespace"}, false
}

// fieldSelector checks sel as the apiserver converts it before it serves
// a list or a watch of gr: a label the resource does not select on is a
// 400 Bad Request, never a selector that silently matches nothing. It
// returns the selector with the apiserver's aliases resolved (a pod's
// spec.host is spec.nodeName).
func fieldSelector(gr schema.GroupResource, sel fields.Selector) (fields.Selector, error) {
	if sel == nil || sel.Empty() {
		return sel, nil
	}
	known, ok := selectable(gr)
	out, err := sel.Transform(func(label, value string) (string, string, error) {
		if gr == (schema.GroupResource{Resource: "pods"}) && label == "spec.host" {
			return "spec.nodeName", value, nil
		}
		for _, k := range known {
			if k == label {
				return label, value, nil
			}
		}
		if !ok {
			return "", "", fmt.Errorf("%q is not a known field selector: only %q, %q", label, "metadata.name", "metadata.namespace")
		}
		return "", "", fmt.Errorf("field label not supported: %s", label)
	})
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return out, nil
}

// fieldSet is obj's values for the field selector labels of its
// resource, as the apiserver's registry computes them (its
// GetAttrs/ToSelectableFields). A label the set lacks reads as "".
func fieldSet(obj runtime.Object) fields.Set {
	f := fields.Set{}
	if m, err := meta.Accessor(obj); err == nil {
		f["metadata.name"] = m.GetName()
		if m.GetNamespace() != "" {
			f["metadata.namespace"] = m.GetNamespace()
		}
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		f["spec.nodeName"] = o.Spec.NodeName
		f["spec.restartPolicy"] = string(o.Spec.RestartPolicy)
		f["spec.schedulerName"] = o.Spec.SchedulerName
		f["spec.serviceAccountName"] = o.Spec.ServiceAccountName
		f["spec.hostNetwork"] = strconv.FormatBool(o.Spec.HostNetwork)
		f["status.phase"] = string(o.Status.Phase)
		ip := o.Status.PodIP
		if len(o.Status.PodIPs) > 0 {
			ip = o.Status.PodIPs[0].IP
		}
		f["status.podIP"] = ip
		f["status.nominatedNodeName"] = o.Status.NominatedNodeName
	case *corev1.Node:
		f["spec.unschedulable"] = strconv.FormatBool(o.Spec.Unschedulable)
	case *corev1.ReplicationController:
		f["status.replicas"] = strconv.Itoa(int(o.Status.Replicas))
	case *corev1.Event:
		f["involvedObject.kind"] = o.InvolvedObject.Kind
		f["involvedObject.namespace"] = o.InvolvedObject.Namespace
		f["involvedObject.name"] = o.InvolvedObject.Name
		f["involvedObject.uid"] = string(o.InvolvedObject.UID)
		f["involvedObject.apiVersion"] = o.InvolvedObject.APIVersion
		f["involvedObject.resourceVersion"] = o.InvolvedObject.ResourceVersion
		f["involvedObject.fieldPath"] = o.InvolvedObject.FieldPath
		f["reason"] = o.Reason
		f["reportingComponent"] = o.ReportingController
		f["source"] = o.Source.Component
		if f["source"] == "" {
			f["source"] = o.ReportingController
		}
		f["type"] = o.Type
	case *corev1.Namespace:
		f["status.phase"] = string(o.Status.Phase)
	case *corev1.Secret:
		f["type"] = string(o.Type)
	case *corev1.Service:
		f["spec.clusterIP"] = o.Spec.ClusterIP
		f["spec.type"] = string(o.Spec.Type)
	case *batchv1.Job:
		f["status.successful"] = strconv.Itoa(int(o.Status.Succeeded))
	case *certificatesv1.CertificateSigningRequest:
		f["spec.signerName"] = o.Spec.SignerName
	}
	return f
}
