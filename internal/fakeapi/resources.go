package fakeapi

import (
	"reflect"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// Resource is one kind of object the server stores.
type Resource struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
	// Status: the resource has a status subresource (an update of the
	// object leaves status as stored, and .../status updates only status).
	Status bool
	// Subresources lists other subresources: serviceaccounts' "token" and
	// namespaces' "finalize" are answered by the server (unless Hook
	// answers them), any other only by Hook (404 otherwise).
	Subresources []string
	// BuiltIn: a resource of client-go's scheme, served with its built-in
	// strategy: strategic merge patches merge by the keys its Go type
	// declares, server-side apply uses its schema, and generation and
	// unconditional updates follow the API server's rules for it. Without
	// it, a custom resource: strategic merge patches are refused (415), an
	// update must name a resourceVersion, and generation is bumped by any
	// change outside metadata (and status, with a status subresource).
	BuiltIn bool
}

// GVK is the resource's group, version and kind.
func (r Resource) GVK() schema.GroupVersionKind { return r.GVR.GroupVersion().WithKind(r.Kind) }

// CustomResource is a custom resource as a CustomResourceDefinition
// serves it; a kind of client-go's scheme (a built-in resource the
// defaults leave out) is served as BuiltIn instead.
func CustomResource(
	gvr schema.GroupVersionResource,
	kind string,
	namespaced, status bool,
) Resource {
	r := Resource{GVR: gvr, Kind: kind, Namespaced: namespaced, Status: status}
	r.BuiltIn = scheme.Scheme.Recognizes(r.GVK())
	return r
}

// generationRule reports whether an update from cur to next of r bumps
// metadata.generation; nil: r has no generation.
type generationRule func(r Resource, cur, next map[string]any) bool

// changed reports whether any of the top-level fields differ.
func changed(cur, next map[string]any, fields ...string) bool {
	for _, f := range fields {
		if !reflect.DeepEqual(cur[f], next[f]) {
			return true
		}
	}
	return false
}

func metaChanged(cur, next map[string]any, field string) bool {
	return !reflect.DeepEqual(metaOf(cur)[field], metaOf(next)[field])
}

// contentChanged reports a change outside metadata (and status, with a
// status subresource).
func contentChanged(r Resource, cur, next map[string]any) bool {
	strip := func(o map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range o {
			if k == "metadata" || k == "apiVersion" || k == "kind" || (r.Status && k == "status") {
				continue
			}
			out[k] = v
		}
		return out
	}
	return !reflect.DeepEqual(strip(cur), strip(next))
}

var (
	onSpec = func(_ Resource, cur, next map[string]any) bool { return changed(cur, next, "spec") }
	// A Deployment's annotations are copied to its ReplicaSets.
	onSpecOrAnnotations = func(_ Resource, cur, next map[string]any) bool {
		return changed(cur, next, "spec") || metaChanged(cur, next, "annotations")
	}
	onContent         generationRule = contentChanged
	onContentOrLabels generationRule = func(r Resource, cur, next map[string]any) bool {
		return contentChanged(r, cur, next) || metaChanged(cur, next, "labels")
	}
	onTemplate = func(_ Resource, cur, next map[string]any) bool {
		return changed(cur, next, "template")
	}
)

// strategy is what the server does differently per resource.
type strategy struct {
	generation generationRule
	// conditional: an update must name a resourceVersion.
	conditional bool
	// graceful: a delete waits out a grace period (Pods).
	graceful bool
}

// builtInStrategies are the built-in resources with a generation, or
// whose updates must name a resourceVersion (k8s.io/kubernetes'
// pkg/registry/*/*/strategy.go); other built-ins have neither.
var builtInStrategies = map[schema.GroupResource]strategy{
	{Resource: "pods"}: {
		generation: onSpec,
		graceful:   true,
	},
	{Resource: "podtemplates"}:                                   {generation: onTemplate},
	{Resource: "replicationcontrollers"}:                         {generation: onSpec},
	{Group: "apps", Resource: "deployments"}:                     {generation: onSpecOrAnnotations},
	{Group: "apps", Resource: "replicasets"}:                     {generation: onSpec},
	{Group: "apps", Resource: "statefulsets"}:                    {generation: onSpec},
	{Group: "apps", Resource: "daemonsets"}:                      {generation: onSpec},
	{Group: "batch", Resource: "jobs"}:                           {generation: onSpec},
	{Group: "batch", Resource: "cronjobs"}:                       {generation: onSpec},
	{Group: "autoscaling", Resource: "horizontalpodautoscalers"}: {generation: onSpec},
	{Group: "policy", Resource: "poddisruptionbudgets"}: {
		generation:  onSpec,
		conditional: true,
	},
	{Group: "networking.k8s.io", Resource: "ingresses"}:         {generation: onSpec},
	{Group: "networking.k8s.io", Resource: "networkpolicies"}:   {generation: onSpec},
	{Group: "discovery.k8s.io", Resource: "endpointslices"}:     {generation: onContentOrLabels},
	{Group: "coordination.k8s.io", Resource: "leases"}:          {conditional: true},
	{Group: "coordination.k8s.io", Resource: "leasecandidates"}: {conditional: true},
	{Group: "storage.k8s.io", Resource: "csidrivers"}:           {conditional: true},
	{Group: "storage.k8s.io", Resource: "csinodes"}:             {conditional: true},
	{Group: "storage.k8s.io", Resource: "volumeattachments"}:    {conditional: true},
	{Group: "storage.k8s.io", Resource: "csistoragecapacities"}: {conditional: true},
	{Group: "node.k8s.io", Resource: "runtimeclasses"}:          {conditional: true},
	{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"}: {
		generation: onContent, conditional: true},
	{Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}: {
		generation: onContent, conditional: true},
	{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"}: {
		generation: onSpec, conditional: true},
	{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicybindings"}: {
		generation: onSpec, conditional: true},
}

// strategy is r's.
func (r Resource) strategy() strategy {
	if !r.BuiltIn {
		return strategy{generation: onContent, conditional: true}
	}
	return builtInStrategies[r.GVR.GroupResource()]
}

// isNamespaces reports whether r is the core namespaces resource.
func (r Resource) isNamespaces() bool {
	return r.GVR.Group == "" && r.GVR.Resource == "namespaces"
}

func core(resource, kind string, namespaced bool) Resource {
	return Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: resource}, Kind: kind,
		Namespaced: namespaced, BuiltIn: true}
}

// DefaultResources are the resources New serves unless told otherwise:
// what a controller host writes itself (Leases, Events, ServiceAccounts
// and their tokens) and common objects for controllers under test.
func DefaultResources() []Resource {
	sa := core("serviceaccounts", "ServiceAccount", true)
	sa.Subresources = []string{"token"}
	namespaces := core("namespaces", "Namespace", false)
	namespaces.Status, namespaces.Subresources = true, []string{"finalize"}
	withStatus := func(r Resource) Resource { r.Status = true; return r }
	group := func(group, resource, kind string) Resource {
		return Resource{
			GVR: schema.GroupVersionResource{
				Group:    group,
				Version:  "v1",
				Resource: resource,
			},
			Kind:       kind,
			Namespaced: true,
			BuiltIn:    true,
		}
	}
	return []Resource{
		withStatus(group("apps", "deployments", "Deployment")),
		withStatus(group("apps", "replicasets", "ReplicaSet")),
		withStatus(group("apps", "statefulsets", "StatefulSet")),
		withStatus(group("apps", "daemonsets", "DaemonSet")),
		withStatus(group("batch", "jobs", "Job")),
		withStatus(core("services", "Service", true)),
		withStatus(core("nodes", "Node", false)),
		withStatus(core("persistentvolumeclaims", "PersistentVolumeClaim", true)),
		group("coordination.k8s.io", "leases", "Lease"),
		core("events", "Event", true),
		core("configmaps", "ConfigMap", true),
		core("secrets", "Secret", true),
		namespaces,
		sa,
		withStatus(core("pods", "Pod", true)),
		group("events.k8s.io", "events", "Event"),
	}
}
