package resourcequota

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

var (
	servicesResource = schema.GroupResource{Resource: "services"}
	pvcsResource     = schema.GroupResource{Resource: "persistentvolumeclaims"}
)

var serviceNames = []corev1.ResourceName{
	objectCountName(servicesResource), corev1.ResourceServices,
	corev1.ResourceServicesLoadBalancers, corev1.ResourceServicesNodePorts,
}

// serviceEvaluator measures services: their count, load balancers and node
// ports. Services have no scopes.
func serviceEvaluator(list listFunc) *evaluator {
	return &evaluator{
		resource: servicesResource,
		list:     list,
		matching: func(in []corev1.ResourceName) []corev1.ResourceName {
			return intersect(in, serviceNames)
		},
		usage: func(obj runtime.Object) (corev1.ResourceList, error) {
			svc, ok := obj.(*corev1.Service)
			if !ok {
				return corev1.ResourceList{}, fmt.Errorf("expected a *v1.Service, got %T", obj)
			}
			return serviceUsage(svc), nil
		},
	}
}

func serviceUsage(svc *corev1.Service) corev1.ResourceList {
	out := corev1.ResourceList{
		objectCountName(servicesResource):    one(),
		corev1.ResourceServices:              one(),
		corev1.ResourceServicesLoadBalancers: zero(),
		corev1.ResourceServicesNodePorts:     zero(),
	}
	ports := int64(len(svc.Spec.Ports))
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		out[corev1.ResourceServicesNodePorts] = *resource.NewQuantity(ports, resource.DecimalSI)
	case corev1.ServiceTypeLoadBalancer:
		if a := svc.Spec.AllocateLoadBalancerNodePorts; a != nil && !*a {
			ports = 0
			for _, p := range svc.Spec.Ports {
				if p.NodePort != 0 {
					ports++
				}
			}
		}
		out[corev1.ResourceServicesNodePorts] = *resource.NewQuantity(ports, resource.DecimalSI)
		out[corev1.ResourceServicesLoadBalancers] = one()
	}
	return out
}

// quotaServiceType is the service type as quota sees it: NodePort,
// LoadBalancer or nothing.
func quotaServiceType(svc *corev1.Service) corev1.ServiceType {
	if t := svc.Spec.Type; t == corev1.ServiceTypeNodePort || t == corev1.ServiceTypeLoadBalancer {
		return t
	}
	return ""
}

const storageClassSuffix = ".storageclass.storage.k8s.io/"

var pvcNames = []corev1.ResourceName{
	corev1.ResourcePersistentVolumeClaims,
	corev1.ResourceRequestsStorage,
}

func pvcMatching(in []corev1.ResourceName) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, name := range in {
		switch {
		case name == objectCountName(pvcsResource), containsName(pvcNames, name):
			out = append(out, name)
		default:
			for _, n := range pvcNames {
				if strings.HasSuffix(string(name), storageClassSuffix+string(n)) {
					out = append(out, name)
					break
				}
			}
		}
	}
	return out
}

// pvcEvaluator measures persistent volume claims: their count and storage,
// in all and per storage class; the VolumeAttributesClass scope selects
// them.
func pvcEvaluator(list listFunc) *evaluator {
	return &evaluator{
		resource: pvcsResource,
		list:     list,
		matching: pvcMatching,
		scope:    pvcInScope,
		usage: func(obj runtime.Object) (corev1.ResourceList, error) {
			pvc, ok := obj.(*corev1.PersistentVolumeClaim)
			if !ok {
				return corev1.ResourceList{}, fmt.Errorf(
					"expected a *v1.PersistentVolumeClaim, got %T",
					obj,
				)
			}
			return pvcUsage(pvc), nil
		},
	}
}

// pvcClass is the claim's storage class: the beta annotation when present
// (it wins, as everywhere in Kubernetes), else spec.storageClassName.
func pvcClass(pvc *corev1.PersistentVolumeClaim) string {
	if class, ok := pvc.Annotations[corev1.BetaStorageClassAnnotation]; ok {
		return class
	}
	if pvc.Spec.StorageClassName != nil {
		return *pvc.Spec.StorageClassName
	}
	return ""
}

func pvcUsage(pvc *corev1.PersistentVolumeClaim) corev1.ResourceList {
	out := corev1.ResourceList{
		corev1.ResourcePersistentVolumeClaims: one(),
		objectCountName(pvcsResource):         one(),
	}
	class := pvcClass(pvc)
	if class != "" {
		out[corev1.ResourceName(class+storageClassSuffix+
			string(corev1.ResourcePersistentVolumeClaims))] = one()
	}
	if storage := pvcStorage(pvc); storage != nil {
		out[corev1.ResourceRequestsStorage] = *storage
		if class != "" {
			out[corev1.ResourceName(class+storageClassSuffix+
				string(corev1.ResourceRequestsStorage))] = *storage
		}
	}
	return out
}

// pvcStorage is the storage the claim holds: its request rounded up to a
// whole byte, or what was allocated when that is more (a failed expansion
// being recovered).
func pvcStorage(pvc *corev1.PersistentVolumeClaim) *resource.Quantity {
	req, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return nil
	}
	out := roundUp(req)
	if alloc, ok := pvc.Status.AllocatedResources[corev1.ResourceStorage]; ok &&
		alloc.Cmp(out) > 0 {
		out = roundUp(alloc)
	}
	return &out
}

// roundUp rounds q up to a whole unit; a quantity already whole is kept as
// written.
func roundUp(q resource.Quantity) resource.Quantity {
	r := q.DeepCopy()
	if !r.RoundUp(0) {
		return r
	}
	return q
}

// pvcAttributeClasses are the volume attributes classes a claim names, in
// its spec, its status or a modification under way.
func pvcAttributeClasses(pvc *corev1.PersistentVolumeClaim) sets.Set[string] {
	out := sets.New[string]()
	if n := pvc.Spec.VolumeAttributesClassName; n != nil && *n != "" {
		out.Insert(*n)
	}
	if n := pvc.Status.CurrentVolumeAttributesClassName; n != nil && *n != "" {
		out.Insert(*n)
	}
	if m := pvc.Status.ModifyVolumeStatus; m != nil && m.TargetVolumeAttributesClassName != "" {
		out.Insert(m.TargetVolumeAttributesClassName)
	}
	return out
}

func pvcInScope(req corev1.ScopedResourceSelectorRequirement, obj runtime.Object) (bool, error) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return false, fmt.Errorf("expected a *v1.PersistentVolumeClaim, got %T", obj)
	}
	if req.ScopeName != corev1.ResourceQuotaScopeVolumeAttributesClass {
		return false, nil
	}
	classes := pvcAttributeClasses(pvc)
	if req.Operator == corev1.ScopeSelectorOpExists {
		return classes.Len() != 0, nil
	}
	sel, err := scopeSelector(req)
	if err != nil {
		return false, fmt.Errorf("failed to parse and convert selector: %w", err)
	}
	if classes.Len() == 0 {
		return sel.Matches(labels.Set{}), nil
	}
	for c := range classes {
		if sel.Matches(labels.Set{string(corev1.ResourceQuotaScopeVolumeAttributesClass): c}) {
			return true, nil
		}
	}
	return false, nil
}
