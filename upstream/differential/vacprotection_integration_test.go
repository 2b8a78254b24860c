//go:build integration

package differential_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/vacprotection"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// vacKeptAnnotation marks the free class once the scenario has seen the
// deleted class a claim names still there and protected, after the
// controller protected the free one.
const vacKeptAnnotation = "differential/claimed-kept-while-claimed"

// TestVACProtection: a class without the finalizer gets it; deleted
// classes a claim or a volume names keep it, one nothing names goes at
// once, and the claimed one goes when its claim does. VolumeAttributesClasses
// are cluster-scoped: their names start with the scenario's namespace.
func TestVACProtection(t *testing.T) {
	class := func(ns, name string) *storagev1.VolumeAttributesClass {
		return &storagev1.VolumeAttributesClass{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name,
				Labels: map[string]string{"differential": ns}},
			DriverName: "csi.example.com",
			Parameters: map[string]string{"iops": "3000"},
		}
	}
	protected := func(vac *storagev1.VolumeAttributesClass) bool {
		return slices.Contains(vac.Finalizers, vacprotection.Finalizer)
	}
	list := func(ctx context.Context, cs kubernetes.Interface,
		ns string) ([]storagev1.VolumeAttributesClass, error) {
		l, err := cs.StorageV1().VolumeAttributesClasses().List(ctx,
			metav1.ListOptions{LabelSelector: "differential=" + ns})
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	}
	res := compare(t, differential.Scenario{
		Name:       "vac-protection protects and releases",
		Controller: vacprotection.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			classes := cs.StorageV1().VolumeAttributesClasses()
			created := map[string]*storagev1.VolumeAttributesClass{}
			for _, name := range []string{"free", "claimed", "volume", "unused"} {
				vac, err := classes.Create(ctx, class(ns, name), metav1.CreateOptions{})
				if err != nil {
					return err
				}
				created[name] = vac
			}
			// Admission adds the finalizer on create: the free class drops
			// it, for the controller to add back.
			free := created["free"]
			free.Finalizers = nil
			if _, err := classes.Update(ctx, free, metav1.UpdateOptions{}); err != nil {
				return err
			}
			if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx,
				&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"},
					Spec: corev1.PersistentVolumeClaimSpec{
						AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceStorage: resource.MustParse("1Gi")}},
						VolumeAttributesClassName: ptr.To(ns + "-claimed"),
					}}, metav1.CreateOptions{}); err != nil {
				return err
			}
			if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: ns + "-volume",
					Labels: map[string]string{"differential": ns}},
				Spec: corev1.PersistentVolumeSpec{
					Capacity: corev1.ResourceList{
						corev1.ResourceStorage: resource.MustParse("1Gi")},
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					PersistentVolumeSource: corev1.PersistentVolumeSource{
						CSI: &corev1.CSIPersistentVolumeSource{Driver: "csi.example.com",
							VolumeHandle: ns}},
					VolumeAttributesClassName: ptr.To(ns + "-volume"),
				}}, metav1.CreateOptions{}); err != nil {
				return err
			}
			for _, name := range []string{"claimed", "volume", "unused"} {
				if err := classes.Delete(ctx, ns+"-"+name, metav1.DeleteOptions{}); err != nil {
					return err
				}
			}
			return nil
		},
		// Once the controller protected the free class: if the claimed one
		// is still there, deleted and protected, say so, and let its claim
		// go (no controller here takes the claim's own finalizer off).
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			classes := cs.StorageV1().VolumeAttributesClasses()
			free, err := classes.Get(ctx, ns+"-free", metav1.GetOptions{})
			if err != nil || !protected(free) || free.Annotations[vacKeptAnnotation] != "" {
				return err
			}
			claimed, err := classes.Get(ctx, ns+"-claimed", metav1.GetOptions{})
			if err != nil || claimed.DeletionTimestamp == nil || !protected(claimed) {
				return nil // gone, or not as it should be: no mark
			}
			free.Annotations = map[string]string{vacKeptAnnotation: "true"}
			if _, err := classes.Update(ctx, free, metav1.UpdateOptions{}); err != nil {
				return err
			}
			return vacDeleteClaimNow(ctx, cs, ns, "data")
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface,
			ns string) ([]runtime.Object, error) {
			items, err := list(ctx, cs, ns)
			if err != nil {
				return nil, err
			}
			for i := range items {
				items[i].Kind = "VolumeAttributesClass"
			}
			return objects(items,
				func(v *storagev1.VolumeAttributesClass) runtime.Object { return v }), nil
		},
		// The free class and the one the volume keeps.
		Settled: func(state []map[string]any) bool {
			return count(state, "VolumeAttributesClass") == 2
		},
		// No controller is left to take the finalizers off.
		Cleanup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			err := vacDeleteClaimNow(ctx, cs, ns, "data")
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			pvs := cs.CoreV1().PersistentVolumes()
			if pv, err := pvs.Get(ctx, ns+"-volume", metav1.GetOptions{}); err == nil {
				pv.Finalizers = nil
				if _, err := pvs.Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
					return err
				}
				if err := pvs.Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil &&
					!apierrors.IsNotFound(err) {
					return err
				}
			} else if !apierrors.IsNotFound(err) {
				return err
			}
			items, err := list(ctx, cs, ns)
			if err != nil {
				return err
			}
			classes := cs.StorageV1().VolumeAttributesClasses()
			for i := range items {
				vac := &items[i]
				vac.Finalizers = nil
				if _, err := classes.Update(ctx, vac, metav1.UpdateOptions{}); err != nil {
					return err
				}
				if err := classes.Delete(ctx, vac.Name, metav1.DeleteOptions{}); err != nil &&
					!apierrors.IsNotFound(err) {
					return err
				}
			}
			return nil
		},
	})
	// Both agree; say what they agree on: the two kept classes, protected,
	// the free one marked (the claimed one was seen kept before it went).
	var names []any
	for _, o := range res.Native {
		md, _ := o["metadata"].(map[string]any)
		names = append(names, md["name"])
		fin, _ := md["finalizers"].([]any)
		ann, _ := md["annotations"].(map[string]any)
		if !slices.Contains(fin, any(vacprotection.Finalizer)) ||
			md["name"] == "<ns>-free" && ann[vacKeptAnnotation] != "true" {
			t.Errorf("native side ended with %v", o)
		}
	}
	if want := []any{"<ns>-free", "<ns>-volume"}; !slices.Equal(names, want) {
		t.Errorf("native side kept %v, want %v", names, want)
	}
}

// vacDeleteClaimNow deletes the claim without waiting for a protection controller:
// its finalizers are taken off first.
func vacDeleteClaimNow(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	claims := cs.CoreV1().PersistentVolumeClaims(ns)
	pvc, err := claims.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	pvc.Finalizers = nil
	if _, err := claims.Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		return err
	}
	return claims.Delete(ctx, name, metav1.DeleteOptions{})
}
