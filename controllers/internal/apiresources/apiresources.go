// Package apiresources answers which API resources a server offers for a
// kind of work, through discovery: the garbage collector wants every
// resource it may list, watch and delete; the namespace controller every
// namespaced one it may delete; the resource-quota controller every
// namespaced one it may count.
//
// # Guarantees
//
//   - Only the server's preferred version of each group is listed, and no
//     subresource ("pods/status"), so one resource is never answered twice.
//   - A partial answer is not thrown away: when some API groups could not be
//     discovered (an aggregated API server that is down), the resources of
//     the others are returned together with the error, which
//     discovery.IsGroupDiscoveryFailedError recognises. Callers go on with
//     what they got and ask again later, as kube-controller-manager does.
//
// # Non-guarantees
//
//   - Nothing is cached: each call asks the server (a cached discovery
//     client passed in caches).
//   - A resource listed may be gone by the time it is used.
package apiresources

import (
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
)

// Scope limits an answer to namespaced resources or not.
type Scope int

const (
	// All resources, namespaced and cluster-scoped.
	All Scope = iota
	// Namespaced resources only.
	Namespaced
)

// Preferred returns the resources of the server's preferred versions that
// are in scope and support every one of verbs. On a partial discovery
// failure it returns the resources it found and the failure (see the
// package doc); on any other failure, nil and the error.
func Preferred(
	d discovery.ServerResourcesInterface,
	scope Scope,
	verbs ...string,
) (map[schema.GroupVersionResource]struct{}, error) {
	if d == nil {
		return nil, errors.New("apiresources: no discovery client")
	}
	lists, err := d.ServerPreferredResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("discovering API resources: %w", err)
	}
	return Filter(lists, scope, verbs...), err
}

// Filter keeps, of discovery's lists, the resources in scope that support
// every one of verbs, leaving out subresources.
func Filter(
	lists []*metav1.APIResourceList,
	scope Scope,
	verbs ...string,
) map[schema.GroupVersionResource]struct{} {
	want := sets.New(verbs...)
	out := map[schema.GroupVersionResource]struct{}{}
	for _, list := range lists {
		if list == nil {
			continue
		}
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue // not a group version this server could serve
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || (scope == Namespaced && !r.Namespaced) {
				continue
			}
			if sets.New(r.Verbs...).IsSuperset(want) {
				out[gv.WithResource(r.Name)] = struct{}{}
			}
		}
	}
	return out
}
