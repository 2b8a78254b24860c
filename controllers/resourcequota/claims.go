package resourcequota

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
)

var claimsResource = resourcev1.SchemeGroupVersion.WithResource("resourceclaims").GroupResource()

// claimEvaluator measures DRA resource claims: their count and, per device
// class, the devices they request (<class>.deviceclass.resource.k8s.io/devices).
// A request with alternatives (firstAvailable) counts, per class, its
// largest alternative. Claims have no scopes.
func claimEvaluator(list listFunc) *evaluator {
	countName := objectCountName(claimsResource)
	return &evaluator{
		resource: claimsResource,
		list:     list,
		matching: func(in []corev1.ResourceName) []corev1.ResourceName {
			var out []corev1.ResourceName
			for _, name := range in {
				if name == countName ||
					strings.HasSuffix(string(name), corev1.ResourceClaimsPerClass) {
					out = append(out, name)
				}
			}
			return out
		},
		usage: func(obj runtime.Object) (corev1.ResourceList, error) {
			claim, ok := obj.(*resourcev1.ResourceClaim)
			if !ok {
				return corev1.ResourceList{}, fmt.Errorf(
					"expected a *v1.ResourceClaim, got %T",
					obj,
				)
			}
			return claimUsage(claim), nil
		},
	}
}

func classDevices(class string) corev1.ResourceName {
	return corev1.ResourceName(class + corev1.ResourceClaimsPerClass)
}

// deviceCount is how many devices a request of mode and count may take.
func deviceCount(mode resourcev1.DeviceAllocationMode, count int64) *resource.Quantity {
	switch mode {
	case resourcev1.DeviceAllocationModeExactCount:
		return resource.NewQuantity(count, resource.DecimalSI)
	case resourcev1.DeviceAllocationModeAll:
		return resource.NewQuantity(resourcev1.AllocationResultsMaxSize, resource.DecimalSI)
	}
	return resource.NewQuantity(0, resource.DecimalSI)
}

func claimUsage(claim *resourcev1.ResourceClaim) corev1.ResourceList {
	out := corev1.ResourceList{objectCountName(claimsResource): one()}
	for _, req := range claim.Spec.Devices.Requests {
		switch {
		case len(req.FirstAvailable) > 0:
			largest := corev1.ResourceList{}
			for _, sub := range req.FirstAvailable {
				name := classDevices(sub.DeviceClassName)
				if q := deviceCount(sub.AllocationMode, sub.Count); q.Cmp(largest[name]) > 0 {
					largest[name] = *q
				}
			}
			addInto(out, largest)
		case req.Exactly != nil:
			addInto(
				out,
				corev1.ResourceList{
					classDevices(req.Exactly.DeviceClassName): *deviceCount(req.Exactly.AllocationMode,
						req.Exactly.Count),
				},
			)
		}
	}
	return out
}
