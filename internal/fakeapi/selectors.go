package fakeapi

import (
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// selectableFields are the fields a field selector may name, besides
// metadata.name and metadata.namespace, by resource: the ones the API
// server indexes that controllers select on.
var selectableFields = map[schema.GroupResource][]string{
	{Resource: "pods"}: {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
		"spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP",
		"status.nominatedNodeName"},
	{Resource: "events"}: {"involvedObject.kind", "involvedObject.namespace",
		"involvedObject.name", "involvedObject.uid", "involvedObject.apiVersion",
		"involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
		"reportingComponent", "source", "type"},
	{Resource: "secrets"}:                    {"type"},
	{Resource: "namespaces"}:                 {"status.phase"},
	{Resource: "nodes"}:                      {"spec.unschedulable"},
	{Resource: "replicationcontrollers"}:     {"status.replicas"},
	{Group: "apps", Resource: "replicasets"}: {"status.replicas"},
	{Group: "batch", Resource: "jobs"}:       {"status.successful"},
}

// selector filters objects by labels and by fields.
type selector struct {
	labels labels.Selector
	fields fields.Selector
}

func parseSelector(r Resource, label, field string) (*selector, error) {
	if label == "" && field == "" {
		return nil, nil
	}
	s := &selector{labels: labels.Everything(), fields: fields.Everything()}
	var err error
	if label != "" {
		if s.labels, err = labels.Parse(label); err != nil {
			return nil, apierrors.NewBadRequest("unable to parse requirement: " + err.Error())
		}
	}
	if field != "" {
		if s.fields, err = fields.ParseSelector(field); err != nil {
			return nil, apierrors.NewBadRequest("fieldSelector: " + err.Error())
		}
		known := append([]string{"metadata.name", "metadata.namespace"},
			selectableFields[r.GVR.GroupResource()]...)
		for _, req := range s.fields.Requirements() {
			if slices.Contains(known, req.Field) {
				continue
			}
			if !r.BuiltIn {
				return nil, notSupported(fmt.Sprintf("field selector %q on a custom resource is "+
					"not supported (selectable fields: metadata.name, metadata.namespace)",
					req.Field))
			}
			return nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s "+
				"(fakeapi knows %s)", req.Field, strings.Join(known, ", ")))
		}
	}
	return s, nil
}

func (s *selector) matches(obj map[string]any) bool {
	if s == nil {
		return true
	}
	if obj == nil {
		return false
	}
	meta := metaOf(obj)
	set := labels.Set{}
	if ls, ok := meta["labels"].(map[string]any); ok {
		for k, v := range ls {
			set[k], _ = v.(string)
		}
	}
	if !s.labels.Matches(set) {
		return false
	}
	if s.fields.Empty() {
		return true
	}
	fs := fields.Set{}
	for _, req := range s.fields.Requirements() {
		fs[req.Field] = fieldValue(obj, req.Field)
	}
	return s.fields.Matches(fs)
}

// fieldValue is the value of a selectable field, as the API server
// renders it for field selectors.
func fieldValue(obj map[string]any, path string) string {
	if path == "source" {
		path = "source.component"
	}
	v, _ := nested(obj, strings.Split(path, ".")...)
	switch t := v.(type) {
	case nil:
		return fieldDefaults[path]
	case string:
		return t
	}
	return fmt.Sprint(v)
}

// fieldDefaults render selectable fields that are not set.
var fieldDefaults = map[string]string{"spec.hostNetwork": "false", "spec.unschedulable": "false",
	"status.replicas": "0", "status.successful": "0"}
