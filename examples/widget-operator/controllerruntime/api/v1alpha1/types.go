// Package v1alpha1 holds the Widget custom resource (group example.ctrlhost.io) with
// hand-written deep-copy functions in place of controller-gen output.
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the Widget API.
	GroupVersion = schema.GroupVersion{Group: "example.ctrlhost.io", Version: "v1alpha1"}

	// SchemeBuilder registers the Widget types with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the Widget types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&Widget{}, &WidgetList{})
}

// Widget asks for a ConfigMap of its name holding Spec.Data and, under
// "secret-keys", the keys of the Secrets labelled for it.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WidgetSpec   `json:"spec,omitempty"`
	Status WidgetStatus `json:"status,omitempty"`
}

// WidgetSpec is what a Widget wants.
type WidgetSpec struct {
	// Data goes into the Widget's ConfigMap as it is.
	Data map[string]string `json:"data,omitempty"`
}

// WidgetStatus is what the operator reports about a Widget.
type WidgetStatus struct {
	// ConfigMap is the name of the Widget's ConfigMap, once written.
	ConfigMap string `json:"configMap,omitempty"`
	// SecretKeys counts the distinct keys of the Secrets labelled for the Widget.
	SecretKeys int `json:"secretKeys,omitempty"`
	// Conditions holds the Ready condition.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// WidgetList is a list of Widgets.
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Widget `json:"items"`
}

// DeepCopyInto copies w into out.
func (w *Widget) DeepCopyInto(out *Widget) {
	*out = *w
	w.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	w.Spec.DeepCopyInto(&out.Spec)
	w.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a copy of w that shares no memory with it.
func (w *Widget) DeepCopy() *Widget {
	if w == nil {
		return nil
	}
	out := new(Widget)
	w.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (w *Widget) DeepCopyObject() runtime.Object {
	return w.DeepCopy()
}

// DeepCopyInto copies s into out.
func (s *WidgetSpec) DeepCopyInto(out *WidgetSpec) {
	*out = *s
	if s.Data != nil {
		out.Data = make(map[string]string, len(s.Data))
		for k, v := range s.Data {
			out.Data[k] = v
		}
	}
}

// DeepCopyInto copies s into out.
func (s *WidgetStatus) DeepCopyInto(out *WidgetStatus) {
	*out = *s
	if s.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(s.Conditions))
		for i := range s.Conditions {
			s.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
}

// DeepCopyInto copies l into out.
func (l *WidgetList) DeepCopyInto(out *WidgetList) {
	*out = *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Widget, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a copy of l that shares no memory with it.
func (l *WidgetList) DeepCopy() *WidgetList {
	if l == nil {
		return nil
	}
	out := new(WidgetList)
	l.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *WidgetList) DeepCopyObject() runtime.Object {
	return l.DeepCopy()
}
