//go:build integration

package differential_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlhost/ctrlhost/controllers/pvprotection"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// keptAnnotation marks the free volume once the scenario has seen the
// deleted volume still there, bound and protected, after the controller
// protected the free one.
const keptAnnotation = "differential/used-kept-while-bound"

// TestPVProtection: a volume without the finalizer gets it; a deleted
// volume keeps it while bound, and goes once released.
func TestPVProtection(t *testing.T) {
	volume := func(ns, name string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name,
				Labels: map[string]string{"differential": ns}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{
					HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + name}},
			},
		}
	}
	type getter func(context.Context, string) (*corev1.PersistentVolume, error)
	pvs := func(cs kubernetes.Interface) getter {
		return func(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
			return cs.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		}
	}
	protected := func(pv *corev1.PersistentVolume) bool {
		return slices.Contains(pv.Finalizers, pvprotection.Finalizer)
	}
	compare(t, differential.Scenario{
		Name:       "pv-protection protects and releases",
		Controller: "persistentvolume-protection-controller",
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			// The API server's admission adds the finalizer on create:
			// the free volume drops it, for the controller to add back.
			free, err := cs.CoreV1().PersistentVolumes().Create(ctx, volume(ns, "free"),
				metav1.CreateOptions{})
			if err != nil {
				return err
			}
			free.Finalizers = nil
			if _, err := cs.CoreV1().PersistentVolumes().Update(ctx, free,
				metav1.UpdateOptions{}); err != nil {
				return err
			}
			used := volume(ns, "used")
			used.Finalizers = []string{pvprotection.Finalizer}
			if used, err = cs.CoreV1().PersistentVolumes().Create(ctx, used,
				metav1.CreateOptions{}); err != nil {
				return err
			}
			used.Status.Phase = corev1.VolumeBound
			if _, err := cs.CoreV1().PersistentVolumes().UpdateStatus(ctx, used,
				metav1.UpdateOptions{}); err != nil {
				return err
			}
			return cs.CoreV1().PersistentVolumes().Delete(ctx, used.Name, metav1.DeleteOptions{})
		},
		// Once the controller protected the free volume: if the deleted one
		// is still there, bound and protected, say so, and release it.
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			get := pvs(cs)
			free, err := get(ctx, ns+"-free")
			if err != nil || !protected(free) || free.Annotations[keptAnnotation] != "" {
				return err
			}
			used, err := get(ctx, ns+"-used")
			if err != nil || used.Status.Phase != corev1.VolumeBound || !protected(used) {
				return nil // gone, or not as it should be: no mark
			}
			free.Annotations = map[string]string{keptAnnotation: "true"}
			if _, err := cs.CoreV1().PersistentVolumes().Update(ctx, free,
				metav1.UpdateOptions{}); err != nil {
				return err
			}
			used.Status.Phase = corev1.VolumeReleased
			_, err = cs.CoreV1().PersistentVolumes().UpdateStatus(ctx, used,
				metav1.UpdateOptions{})
			return err
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface,
			ns string) ([]runtime.Object, error) {
			l, err := cs.CoreV1().PersistentVolumes().List(ctx,
				metav1.ListOptions{LabelSelector: "differential=" + ns})
			if err != nil {
				return nil, err
			}
			for i := range l.Items {
				l.Items[i].Kind = "PersistentVolume"
			}
			return objects(l.Items,
				func(p *corev1.PersistentVolume) runtime.Object { return p }), nil
		},
		Settled: func(state []map[string]any) bool { return count(state, "PersistentVolume") == 1 },
		// No controller is left to take the finalizers off.
		Cleanup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			l, err := cs.CoreV1().PersistentVolumes().List(ctx,
				metav1.ListOptions{LabelSelector: "differential=" + ns})
			if err != nil {
				return err
			}
			for i := range l.Items {
				pv := &l.Items[i]
				pv.Finalizers = nil
				if _, err := cs.CoreV1().PersistentVolumes().Update(ctx, pv,
					metav1.UpdateOptions{}); err != nil {
					return err
				}
				if err := cs.CoreV1().PersistentVolumes().Delete(ctx, pv.Name,
					metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
			return nil
		},
	})
}
