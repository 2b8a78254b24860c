package fakeapi

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resource is one kind of object the server stores.
type Resource struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
	// Status: the resource has a status subresource (an update of the
	// object leaves status as stored, and .../status updates only status).
	Status bool
	// Subresources lists other subresources served by Hook alone (for
	// example serviceaccounts' "token"): the server answers 404 unless
	// Hook answers them.
	Subresources []string
}

// GVK is the resource's group, version and kind.
func (r Resource) GVK() schema.GroupVersionKind { return r.GVR.GroupVersion().WithKind(r.Kind) }

func core(resource, kind string, namespaced bool) Resource {
	return Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: resource}, Kind: kind, Namespaced: namespaced}
}

// DefaultResources are the resources New serves unless told otherwise:
// what a controller host writes itself (Leases, Events, ServiceAccounts
// and their tokens) and common objects for controllers under test.
func DefaultResources() []Resource {
	sa := core("serviceaccounts", "ServiceAccount", true)
	sa.Subresources = []string{"token"}
	pods := core("pods", "Pod", true)
	pods.Status = true
	withStatus := func(r Resource) Resource { r.Status = true; return r }
	apps := func(resource, kind string) Resource {
		return withStatus(Resource{GVR: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: resource},
			Kind: kind, Namespaced: true})
	}
	return []Resource{
		apps("deployments", "Deployment"),
		apps("replicasets", "ReplicaSet"),
		apps("statefulsets", "StatefulSet"),
		apps("daemonsets", "DaemonSet"),
		withStatus(Resource{GVR: schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"},
			Kind: "Job", Namespaced: true}),
		withStatus(core("services", "Service", true)),
		withStatus(core("nodes", "Node", false)),
		withStatus(core("persistentvolumeclaims", "PersistentVolumeClaim", true)),
		{GVR: schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
			Kind: "Lease", Namespaced: true},
		core("events", "Event", true),
		core("configmaps", "ConfigMap", true),
		core("secrets", "Secret", true),
		core("namespaces", "Namespace", false),
		sa,
		pods,
		{GVR: schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"},
			Kind: "Event", Namespaced: true},
	}
}
