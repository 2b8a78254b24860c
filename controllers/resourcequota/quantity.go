package resourcequota

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The resource-list arithmetic quota needs: KCM has it in
// k8s.io/apiserver/pkg/quota/v1, which the root module does not import.

// addLists returns a new list holding a's and b's quantities, summed where
// both name a resource.
func addLists(a, b corev1.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, len(a)+len(b))
	for name, q := range a {
		out[name] = q.DeepCopy()
	}
	for name, q := range b {
		sum, ok := out[name]
		if !ok {
			out[name] = q.DeepCopy()
			continue
		}
		sum.Add(q)
		out[name] = sum
	}
	return out
}

// sameLists reports whether a and b name the same resources with equal
// quantities (1000m equals 1).
func sameLists(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, qa := range a {
		qb, ok := b[name]
		if !ok || qa.Cmp(qb) != 0 {
			return false
		}
	}
	return true
}

// maskList returns the part of l whose names are in names.
func maskList(l corev1.ResourceList, names []corev1.ResourceName) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range l {
		if slices.Contains(names, name) {
			out[name] = q.DeepCopy()
		}
	}
	return out
}

// resourceNames lists l's names, sorted.
func resourceNames(l corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(l))
	for name := range l {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// intersect returns the names of a that are also in b, without repeats, in
// a's order.
func intersect(a, b []corev1.ResourceName) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, name := range a {
		if slices.Contains(b, name) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// maxLists returns, per resource named in any of lists, the largest
// quantity.
func maxLists(lists ...corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, l := range lists {
		for name, q := range l {
			if cur, ok := out[name]; !ok || q.Cmp(cur) > 0 {
				out[name] = q.DeepCopy()
			}
		}
	}
	return out
}

// addInto adds src's quantities to dst in place.
func addInto(dst, src corev1.ResourceList) {
	for name, q := range src {
		cur, ok := dst[name]
		if !ok {
			dst[name] = q.DeepCopy()
			continue
		}
		cur.Add(q)
		dst[name] = cur
	}
}

// maxInto raises dst's quantities to src's where src's are larger.
func maxInto(dst, src corev1.ResourceList) {
	for name, q := range src {
		if cur, ok := dst[name]; !ok || q.Cmp(cur) > 0 {
			dst[name] = q.DeepCopy()
		}
	}
}

// one is a count of 1, as quota's object counts are written.
func one() resource.Quantity { return *resource.NewQuantity(1, resource.DecimalSI) }

// zero is an empty count, as quota's unused resources are written.
func zero() resource.Quantity { return resource.Quantity{Format: resource.DecimalSI} }
