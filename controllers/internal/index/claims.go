package index

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// PodsByClaim names the pod index keyed by ClaimKey of every
// PersistentVolumeClaim a pod names: a persistentVolumeClaim volume's
// claim, and the claim a generic ephemeral volume gets
// (EphemeralClaimName), whether or not that claim is the pod's. A pod is
// indexed under each claim it names.
//
// It reads of a pod its namespace, name and spec.volumes' names,
// persistentVolumeClaim.claimName and ephemeral: a controller that adds it
// over a pruned cache declares those (PodsByClaimReads).
const PodsByClaim = "ctrlhost.io/pod-claim"

// PodsByClaimReads are the pod fields (besides metadata) the index reads,
// for a descriptor's WithReads.
var PodsByClaimReads = []string{
	"spec.volumes.name", "spec.volumes.persistentVolumeClaim.claimName", "spec.volumes.ephemeral",
}

// PodsByClaimIndexers is the index, for a descriptor's WithIndexers.
func PodsByClaimIndexers() cache.Indexers {
	return cache.Indexers{PodsByClaim: podByClaim}
}

// AddPodsByClaim adds the index to a pod informer.
func AddPodsByClaim(pods cache.SharedIndexInformer) error {
	return Add(pods, PodsByClaim, podByClaim)
}

func podByClaim(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	var keys []string
	for i := range p.Spec.Volumes {
		if name := ClaimOf(p, &p.Spec.Volumes[i]); name != "" {
			keys = append(keys, ClaimKey(p.Namespace, name))
		}
	}
	return keys, nil
}

// ClaimOf is the claim volume v of pod p names: a persistentVolumeClaim
// volume's claim, an ephemeral volume's EphemeralClaimName, else "".
func ClaimOf(p *corev1.Pod, v *corev1.Volume) string {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName
	case v.Ephemeral != nil:
		return EphemeralClaimName(p, v)
	}
	return ""
}

// EphemeralClaimName is the name of the claim of p's generic ephemeral
// volume v, as Kubernetes fixes it: "<pod>-<volume>".
func EphemeralClaimName(p *corev1.Pod, v *corev1.Volume) string {
	return p.Name + "-" + v.Name
}

// ClaimKey is the index key of the pods in namespace that name claim.
func ClaimKey(namespace, claim string) string { return namespace + "/" + claim }

// PodsNaming returns the pods indexer holds that name the claim in
// namespace.
func PodsNaming(indexer cache.Indexer, namespace, claim string) ([]*corev1.Pod, error) {
	objs, err := indexer.ByIndex(PodsByClaim, ClaimKey(namespace, claim))
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
