//go:build integration

package differential_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/pvcprotection"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// claimKeptAnnotation marks the free claim once the scenario has seen the
// deleted claims their pods use still there and protected, after the
// controller protected the free one.
const claimKeptAnnotation = "differential/used-kept-while-used"

// pvcClaimSpec is a claim of 1Gi, ReadWriteOnce.
func pvcClaimSpec() corev1.PersistentVolumeClaimSpec {
	return corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}
}

// pvcClaimVolume is a pod volume naming claim.
func pvcClaimVolume(claim string) corev1.Volume {
	return corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

// pvcEphemeralVolume is a generic ephemeral pod volume named name.
func pvcEphemeralVolume(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		Ephemeral: &corev1.EphemeralVolumeSource{
			VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: pvcClaimSpec()}}}}
}

// pvcPod is a pod with volumes, on node unless it is "" (no kubelet runs
// there: the pod stays Pending).
func pvcPod(name, node string, volumes ...corev1.Volume) *corev1.Pod {
	p := pod(name, nil)
	p.Spec.NodeName = node
	p.Spec.Volumes = volumes
	return p
}

// TestPVCProtection: a claim without the finalizer gets it; deleted claims
// a scheduled pod uses (directly, or as its own ephemeral volume's claim)
// are kept until their pods go; a deleted claim named like a pod's
// ephemeral claim but not the pod's goes at once; bound claims get the
// Unused condition, False while a pod (even unscheduled) uses them.
func TestPVCProtection(t *testing.T) {
	claims := func(cs kubernetes.Interface, ns string) pvcClaims {
		return pvcClaims{cs.CoreV1().PersistentVolumeClaims(ns)}
	}
	protected := func(c *corev1.PersistentVolumeClaim) bool {
		return slices.Contains(c.Finalizers, pvcprotection.Finalizer)
	}
	compare(t, differential.Scenario{
		Name:       "pvc-protection keeps claims in use until their users go",
		Controller: "persistentvolumeclaim-protection-controller",
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			pvcs := claims(cs, ns)
			// The API server's admission adds the finalizer on create:
			// the free claim drops it, for the controller to add back.
			free, err := pvcs.create(ctx, "free", nil)
			if err != nil {
				return err
			}
			free.Finalizers = nil
			if _, err := pvcs.Update(ctx, free, metav1.UpdateOptions{}); err != nil {
				return err
			}
			for _, name := range []string{"idle", "busy"} {
				c, err := pvcs.create(ctx, name, nil)
				if err != nil {
					return err
				}
				c.Status.Phase = corev1.ClaimBound
				if _, err := pvcs.UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
					return err
				}
			}
			podsIn := cs.CoreV1().Pods(ns)
			for _, p := range []*corev1.Pod{
				pvcPod("user", "node-x", pvcClaimVolume("data")),
				pvcPod("keeper", "", pvcClaimVolume("busy")),
			} {
				if _, err := podsIn.Create(ctx, p, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			if _, err := pvcs.create(ctx, "data", nil); err != nil {
				return err
			}
			// eph-scratch is the claim of eph's ephemeral volume, and
			// eph's; stranger-scratch is named like stranger's but is
			// not stranger's.
			for _, name := range []string{"eph", "stranger"} {
				p, err := podsIn.Create(ctx, pvcPod(name, "node-x", pvcEphemeralVolume("scratch")),
					metav1.CreateOptions{})
				if err != nil {
					return err
				}
				var owner []metav1.OwnerReference
				if name == "eph" {
					owner = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name,
						UID: p.UID, Controller: ptr.To(true)}}
				}
				if _, err := pvcs.create(ctx, name+"-scratch", owner); err != nil {
					return err
				}
			}
			for _, name := range []string{"data", "eph-scratch", "stranger-scratch"} {
				if err := pvcs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					return err
				}
			}
			return nil
		}),
		// Once the controller protected the free claim (it syncs data and
		// eph-scratch first, in name order): if both are still there and
		// protected, say so, and delete their pods.
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			pvcs := claims(cs, ns)
			free, err := pvcs.Get(ctx, "free", metav1.GetOptions{})
			if err != nil || !protected(free) || free.Annotations[claimKeptAnnotation] != "" {
				return err
			}
			for _, name := range []string{"data", "eph-scratch"} {
				c, err := pvcs.Get(ctx, name, metav1.GetOptions{})
				if err != nil || !protected(c) {
					return nil // gone, or not as it should be: no mark
				}
			}
			free.Annotations = map[string]string{claimKeptAnnotation: "true"}
			if _, err := pvcs.Update(ctx, free, metav1.UpdateOptions{}); err != nil {
				return err
			}
			for _, name := range []string{"user", "eph"} {
				if err := cs.CoreV1().Pods(ns).Delete(ctx, name,
					metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
					return err
				}
			}
			return nil
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface,
			ns string) ([]runtime.Object, error) {
			l, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			for i := range l.Items {
				l.Items[i].Kind = "PersistentVolumeClaim"
			}
			objs := objects(l.Items,
				func(c *corev1.PersistentVolumeClaim) runtime.Object { return c })
			pods, err := podsIn(ctx, cs, ns)
			return append(objs, pods...), err
		},
		// free, idle and busy are left, and the mark was made.
		Settled: func(state []map[string]any) bool {
			if count(state, "PersistentVolumeClaim") != 3 {
				return false
			}
			for _, o := range state {
				md, _ := o["metadata"].(map[string]any)
				if a, _ := md["annotations"].(map[string]any); a[claimKeptAnnotation] == "true" {
					return true
				}
			}
			return false
		},
		Cleanup: deletePods,
	})
}

// pvcClaims is a namespace's claims client that creates claims of
// pvcClaimSpec.
type pvcClaims struct {
	typedcorev1.PersistentVolumeClaimInterface
}

func (k pvcClaims) create(ctx context.Context, name string,
	owners []metav1.OwnerReference) (*corev1.PersistentVolumeClaim, error) {
	return k.Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: owners},
		Spec:       pvcClaimSpec(),
	}, metav1.CreateOptions{})
}
