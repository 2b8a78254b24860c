// Package index holds the informer indexes the built-in controllers share,
// so that controllers running in one host add each index to a shared
// informer once, under one name, instead of one copy each.
//
// Guarantees: Add is idempotent and safe when several controllers of one
// term (or a warm-standby host that declared the index before the informer
// started) add the same index; the pod index keys every pod, orphans
// included, by its namespace and controller.
//
// Non-guarantees: an index is only as fresh as its informer; a pod whose
// controller reference changes moves between keys when the update reaches
// the informer, not before.
package index

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// PodsByController names the pod index keyed by Key of each pod's
// controller, or by the bare namespace for a pod without one.
const PodsByController = "ctrlhost.io/pod-controller"

// PodsByControllerIndexers is the pod index, for a descriptor's
// WithIndexers.
func PodsByControllerIndexers() cache.Indexers {
	return cache.Indexers{PodsByController: podByController}
}

// Add adds f under name to inf unless an index of that name is there
// already; an index of that name added by another controller, concurrently
// or declared before the informer started, is not an error. Every
// controller adding one name must pass the same function.
func Add(inf cache.SharedIndexInformer, name string, f cache.IndexFunc) error {
	if _, ok := inf.GetIndexer().GetIndexers()[name]; ok {
		return nil
	}
	err := inf.AddIndexers(cache.Indexers{name: f})
	if _, ok := inf.GetIndexer().GetIndexers()[name]; ok {
		return nil
	}
	return err
}

// AddPodsByController adds the pod index to a pod informer.
func AddPodsByController(pods cache.SharedIndexInformer) error {
	return Add(pods, PodsByController, podByController)
}

func podByController(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	return []string{ControllerKey(p.Namespace, metav1.GetControllerOfNoCopy(p))}, nil
}

// Key is the index key of the pods in namespace whose controller is the
// kind object name with uid.
func Key(namespace, kind, name string, uid types.UID) string {
	return namespace + "/" + kind + "/" + name + "/" + string(uid)
}

// ControllerKey is Key of ref, or namespace alone when ref is nil (the
// key of the namespace's orphans).
func ControllerKey(namespace string, ref *metav1.OwnerReference) string {
	if ref == nil {
		return namespace
	}
	return Key(namespace, ref.Kind, ref.Name, ref.UID)
}

// Pods returns the pods indexer holds under key.
func Pods(indexer cache.Indexer, key string) ([]*corev1.Pod, error) {
	objs, err := indexer.ByIndex(PodsByController, key)
	if err != nil {
		return nil, err
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// OwnedAndOrphans returns the pods indexer holds for the controller kind
// name uid in namespace, then the namespace's orphans: the candidates a
// controller claims from.
func OwnedAndOrphans(
	indexer cache.Indexer,
	namespace, kind, name string,
	uid types.UID,
) ([]*corev1.Pod, error) {
	owned, err := Pods(indexer, Key(namespace, kind, name, uid))
	if err != nil {
		return nil, err
	}
	orphans, err := Pods(indexer, ControllerKey(namespace, nil))
	if err != nil {
		return nil, err
	}
	return append(owned, orphans...), nil
}

// PodsByNode names the pod index keyed by the node each pod is bound to;
// pods not bound to a node are not indexed. The daemonset, node lifecycle
// and taint eviction controllers share it (KCM's podNodeName index).
const PodsByNode = "ctrlhost.io/pod-node"

// PodsByNodeIndexers is that index, for a descriptor's WithIndexers.
func PodsByNodeIndexers() cache.Indexers {
	return cache.Indexers{PodsByNode: podByNode}
}

// AddPodsByNode adds the index to a pod informer.
func AddPodsByNode(pods cache.SharedIndexInformer) error {
	return Add(pods, PodsByNode, podByNode)
}

func podByNode(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Spec.NodeName == "" {
		return nil, nil
	}
	return []string{p.Spec.NodeName}, nil
}

// ByControllerUID names the index of any resource keyed by the UID of each
// object's controller; objects without one are not indexed. (A ReplicaSet
// by its Deployment's UID, a Job by its CronJob's.)
const ByControllerUID = "ctrlhost.io/controller-uid"

// ByControllerUIDIndexers is that index, for a descriptor's WithIndexers.
func ByControllerUIDIndexers() cache.Indexers {
	return cache.Indexers{ByControllerUID: controllerUID}
}

// AddByControllerUID adds the index to inf.
func AddByControllerUID(inf cache.SharedIndexInformer) error {
	return Add(inf, ByControllerUID, controllerUID)
}

func controllerUID(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
		return []string{string(ref.UID)}, nil
	}
	return nil, nil
}
