package pvprotection

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

func volume(name string, phase corev1.PersistentVolumePhase, deleting bool,
	finalizers ...string) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: finalizers},
		Status:     corev1.PersistentVolumeStatus{Phase: phase}}
	if deleting {
		now := metav1.Now()
		pv.DeletionTimestamp = &now
	}
	return pv
}

func TestSync(t *testing.T) {
	other := "example.com/other"
	tests := []struct {
		name string
		pv   *corev1.PersistentVolume
		want []string // the finalizers written; nil: nothing written
	}{
		{"a new volume gets the finalizer", volume("v", corev1.VolumeAvailable, false, other),
			[]string{other, Finalizer}},
		{"a volume with it: nothing", volume("v", corev1.VolumeBound, false, Finalizer), nil},
		{"deleted while bound: kept", volume("v", corev1.VolumeBound, true, Finalizer, other), nil},
		{"deleted, released: removed", volume("v", corev1.VolumeReleased, true, other, Finalizer),
			[]string{other}},
		{"deleted, available: removed", volume("v", corev1.VolumeAvailable, true, Finalizer),
			[]string{}},
		{"deleted without it: nothing (not added back)",
			volume("v", corev1.VolumeReleased, true, other),
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.pv.DeepCopy())
			client.ClearActions()
			c := &controller{client: client,
				volumes: corelisters.NewPersistentVolumeLister(
					controllertest.ClusterIndexer(t, tt.pv))}
			if err := c.sync(t.Context(), "v"); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range client.Actions() {
				u, ok := a.(k8stesting.UpdateAction)
				if !ok || a.GetVerb() != "update" {
					t.Errorf("unexpected %s", a.GetVerb())
					continue
				}
				got = append([]string{}, u.GetObject().(*corev1.PersistentVolume).Finalizers...)
			}
			if (got == nil) != (tt.want == nil) || !slices.Equal(got, tt.want) {
				t.Errorf("wrote finalizers %q, want %q (nil: no write)", got, tt.want)
			}
		})
	}
	if err := (&controller{volumes: corelisters.NewPersistentVolumeLister(
		controllertest.ClusterIndexer[*corev1.PersistentVolume](t))}).sync(
		t.Context(), "gone"); err != nil {
		t.Errorf("sync of a gone volume = %v, want nil", err)
	}
}

func TestOnlyVolumesThatNeedAWriteAreQueued(t *testing.T) {
	for _, tt := range []struct {
		pv   *corev1.PersistentVolume
		want bool
	}{
		{volume("v", corev1.VolumeAvailable, false), true},
		{volume("v", corev1.VolumeBound, false, Finalizer), false},
		{volume("v", corev1.VolumeBound, true, Finalizer), true},
		{volume("v", corev1.VolumeReleased, true), false},
	} {
		if got := needsWrite(nil, tt.pv); got != tt.want {
			t.Errorf("needsWrite(%+v, %+v) = %v, want %v",
				tt.pv.ObjectMeta, tt.pv.Status, got, tt.want)
		}
	}
}
