// Package v1alpha1 is the Widget custom resource of the example operator:
// hand-written Go types (no code generator), registered nowhere at import.
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The Widget resource.
var (
	GroupVersion = schema.GroupVersion{Group: "example.ctrlhost.io", Version: "v1alpha1"}
	Resource     = GroupVersion.WithResource("widgets")
	Kind         = GroupVersion.WithKind("Widget")
)

// Widget asks for a ConfigMap of its name holding Spec.Data and, under
// "secret-keys", the keys of the Secrets labelled for it.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WidgetSpec   `json:"spec,omitempty"`
	Status            WidgetStatus `json:"status,omitempty"`
}

// WidgetSpec is what a Widget wants.
type WidgetSpec struct {
	// Data goes into the Widget's ConfigMap as it is.
	Data map[string]string `json:"data,omitempty"`
}

// WidgetStatus is what the operator reports.
type WidgetStatus struct {
	// ConfigMap is the name of the Widget's ConfigMap, once made.
	ConfigMap string `json:"configMap,omitempty"`
	// SecretKeys counts the keys of the Secrets labelled for the Widget.
	SecretKeys int `json:"secretKeys,omitempty"`
	// Conditions: Ready.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (w *Widget) DeepCopyObject() runtime.Object { return w.DeepCopy() }

// DeepCopy returns a copy that shares nothing with w.
func (w *Widget) DeepCopy() *Widget {
	if w == nil {
		return nil
	}
	c := &Widget{TypeMeta: w.TypeMeta}
	w.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	if w.Spec.Data != nil {
		c.Spec.Data = make(map[string]string, len(w.Spec.Data))
		for k, v := range w.Spec.Data {
			c.Spec.Data[k] = v
		}
	}
	c.Status = w.Status
	if w.Status.Conditions != nil {
		c.Status.Conditions = make([]metav1.Condition, len(w.Status.Conditions))
		for i := range w.Status.Conditions {
			w.Status.Conditions[i].DeepCopyInto(&c.Status.Conditions[i])
		}
	}
	return c
}
