package replicaset

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// kind is the API type a controller manages. The shared logic works on
// *appsv1.ReplicaSet values; the ReplicationController kind converts on the
// way in (informer objects, reads) and out (status writes, events), the way
// upstream treats ReplicationController as an older version of ReplicaSet.
//
// Values returned by view, get and list may share memory with the informer
// cache: they are read-only (DeepCopy before changing them).
type kind interface {
	gvk() schema.GroupVersionKind
	informer() cache.SharedIndexInformer
	// view returns an informer object of this kind as a ReplicaSet.
	view(obj any) (*appsv1.ReplicaSet, bool)
	// get reads one object from the informer cache.
	get(namespace, name string) (*appsv1.ReplicaSet, error)
	// list reads a namespace's objects from the informer cache.
	list(namespace string) ([]*appsv1.ReplicaSet, error)
	// fresh reads one object from the API server, bypassing caches.
	fresh(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error)
	// updateStatus writes rs.Status through the status subresource.
	updateStatus(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error)
	// object returns rs as its real kind, for events. Read-only.
	object(rs *appsv1.ReplicaSet) runtime.Object
	// hasTerminatingReplicas reports whether the kind's status has a
	// terminatingReplicas field.
	hasTerminatingReplicas() bool
}

// rsKind is apps/v1 ReplicaSet: no conversion.
type rsKind struct {
	client kubernetes.Interface
	inf    appsinformers.ReplicaSetInformer
}

func (k rsKind) gvk() schema.GroupVersionKind {
	return appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
}
func (k rsKind) informer() cache.SharedIndexInformer         { return k.inf.Informer() }
func (k rsKind) object(rs *appsv1.ReplicaSet) runtime.Object { return rs }
func (k rsKind) hasTerminatingReplicas() bool                { return true }

func (k rsKind) view(obj any) (*appsv1.ReplicaSet, bool) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	return rs, ok
}

func (k rsKind) get(namespace, name string) (*appsv1.ReplicaSet, error) {
	return k.inf.Lister().ReplicaSets(namespace).Get(name)
}

func (k rsKind) list(namespace string) ([]*appsv1.ReplicaSet, error) {
	return k.inf.Lister().ReplicaSets(namespace).List(labels.Everything())
}

func (k rsKind) fresh(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error) {
	return k.client.AppsV1().ReplicaSets(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (k rsKind) updateStatus(
	ctx context.Context,
	rs *appsv1.ReplicaSet,
) (*appsv1.ReplicaSet, error) {
	return k.client.AppsV1().ReplicaSets(rs.Namespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{})
}

// rcKind is core/v1 ReplicationController, converted to and from
// ReplicaSet.
type rcKind struct {
	client kubernetes.Interface
	inf    coreinformers.ReplicationControllerInformer
}

func (k rcKind) gvk() schema.GroupVersionKind {
	return corev1.SchemeGroupVersion.WithKind("ReplicationController")
}
func (k rcKind) informer() cache.SharedIndexInformer { return k.inf.Informer() }
func (k rcKind) hasTerminatingReplicas() bool        { return false }

func (k rcKind) object(rs *appsv1.ReplicaSet) runtime.Object {
	return &corev1.ReplicationController{ObjectMeta: rs.ObjectMeta}
}

func (k rcKind) view(obj any) (*appsv1.ReplicaSet, bool) {
	rc, ok := obj.(*corev1.ReplicationController)
	if !ok {
		return nil, false
	}
	return rcToRS(rc), true
}

func (k rcKind) get(namespace, name string) (*appsv1.ReplicaSet, error) {
	rc, err := k.inf.Lister().ReplicationControllers(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	return rcToRS(rc), nil
}

func (k rcKind) list(namespace string) ([]*appsv1.ReplicaSet, error) {
	rcs, err := k.inf.Lister().ReplicationControllers(namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]*appsv1.ReplicaSet, 0, len(rcs))
	for _, rc := range rcs {
		out = append(out, rcToRS(rc))
	}
	return out, nil
}

func (k rcKind) fresh(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error) {
	rc, err := k.client.CoreV1().
		ReplicationControllers(namespace).
		Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return rcToRS(rc), nil
}

func (k rcKind) updateStatus(
	ctx context.Context,
	rs *appsv1.ReplicaSet,
) (*appsv1.ReplicaSet, error) {
	rc, err := k.client.CoreV1().
		ReplicationControllers(rs.Namespace).
		UpdateStatus(ctx, rsToRC(rs), metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return rcToRS(rc), nil
}

// rcToRS converts a ReplicationController to a ReplicaSet sharing no memory
// with it. The selector map becomes matchLabels; an empty one becomes a nil
// selector (which selects nothing, as upstream's RC lister treats it). A nil
// replicas count is the API default, 1.
func rcToRS(rc *corev1.ReplicationController) *appsv1.ReplicaSet {
	rc = rc.DeepCopy()
	rs := &appsv1.ReplicaSet{
		ObjectMeta: rc.ObjectMeta,
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        ptr.To(ptr.Deref(rc.Spec.Replicas, 1)),
			MinReadySeconds: rc.Spec.MinReadySeconds,
		},
		Status: appsv1.ReplicaSetStatus{
			Replicas:             rc.Status.Replicas,
			FullyLabeledReplicas: rc.Status.FullyLabeledReplicas,
			ReadyReplicas:        rc.Status.ReadyReplicas,
			AvailableReplicas:    rc.Status.AvailableReplicas,
			ObservedGeneration:   rc.Status.ObservedGeneration,
		},
	}
	if len(rc.Spec.Selector) > 0 {
		rs.Spec.Selector = &metav1.LabelSelector{MatchLabels: rc.Spec.Selector}
	}
	if rc.Spec.Template != nil {
		rs.Spec.Template = *rc.Spec.Template
	}
	for _, c := range rc.Status.Conditions {
		rs.Status.Conditions = append(rs.Status.Conditions, appsv1.ReplicaSetCondition{
			Type:               appsv1.ReplicaSetConditionType(c.Type),
			Status:             c.Status,
			LastTransitionTime: c.LastTransitionTime,
			Reason:             c.Reason,
			Message:            c.Message,
		})
	}
	return rs
}

// rsToRC is the inverse of rcToRS for ReplicaSets it produced.
// TerminatingReplicas has no ReplicationController field and is dropped.
func rsToRC(rs *appsv1.ReplicaSet) *corev1.ReplicationController {
	rs = rs.DeepCopy()
	rc := &corev1.ReplicationController{
		ObjectMeta: rs.ObjectMeta,
		Spec: corev1.ReplicationControllerSpec{
			Replicas:        rs.Spec.Replicas,
			MinReadySeconds: rs.Spec.MinReadySeconds,
		},
		Status: corev1.ReplicationControllerStatus{
			Replicas:             rs.Status.Replicas,
			FullyLabeledReplicas: rs.Status.FullyLabeledReplicas,
			ReadyReplicas:        rs.Status.ReadyReplicas,
			AvailableReplicas:    rs.Status.AvailableReplicas,
			ObservedGeneration:   rs.Status.ObservedGeneration,
		},
	}
	if rs.Spec.Selector != nil {
		rc.Spec.Selector = rs.Spec.Selector.MatchLabels
	}
	if !equality.Semantic.DeepEqual(rs.Spec.Template, corev1.PodTemplateSpec{}) {
		rc.Spec.Template = &rs.Spec.Template
	}
	for _, c := range rs.Status.Conditions {
		rc.Status.Conditions = append(rc.Status.Conditions, corev1.ReplicationControllerCondition{
			Type:               corev1.ReplicationControllerConditionType(c.Type),
			Status:             c.Status,
			LastTransitionTime: c.LastTransitionTime,
			Reason:             c.Reason,
			Message:            c.Message,
		})
	}
	return rc
}
