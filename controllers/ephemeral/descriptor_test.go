package ephemeral_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlhost/ctrlhost/controllers/ephemeral"
	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
	"github.com/ctrlhost/ctrlhost/shard"
)

var pods = corev1.SchemeGroupVersion.WithResource("pods")

func TestDescriptorAndFlags(t *testing.T) {
	d := ephemeral.Descriptor(ephemeral.NewOptions())
	controllertest.CheckIdentity(t, d, controllertest.Identity{
		Name: "ephemeral-volume-controller", Alias: "ephemeral-volume",
		EventSource: "ephemeral_volume"})
	if k, ok := d.IsSharded(); !ok || k != shard.ByNamespace {
		t.Error("not sharded by namespace")
	}
	if _, ok := d.Indexers(pods)[index.PodsByClaim]; !ok {
		t.Errorf("the pod index %s is not declared", index.PodsByClaim)
	}
	for _, r := range index.PodsByClaimReads {
		if !slices.Contains(d.Reads()[pods], r) {
			t.Errorf("the index reads %s, which is not declared", r)
		}
	}
	o := ephemeral.NewOptions()
	f := controllertest.ParseFlag(t, o.AddFlags, "concurrent-ephemeralvolume-syncs",
		"--concurrent-ephemeralvolume-syncs=7")
	if f.DefValue != "5" || !strings.Contains(f.Usage, "ephemeral volume syncing operations") {
		t.Errorf("--concurrent-ephemeralvolume-syncs: %+v", f)
	}
	if o.ConcurrentEphemeralVolumeSyncs != 7 {
		t.Errorf("ConcurrentEphemeralVolumeSyncs %d, want 7", o.ConcurrentEphemeralVolumeSyncs)
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	for _, tt := range []struct {
		name    string
		o       ephemeral.Options
		wantErr []string
	}{
		{"defaults", ephemeral.NewOptions(), nil},
		{"one", ephemeral.Options{ConcurrentEphemeralVolumeSyncs: 1}, nil},
		{"zero", ephemeral.Options{}, []string{"ephemeral-volume-controller",
			"--concurrent-ephemeralvolume-syncs: must be at least 1, got 0"}},
		{"negative", ephemeral.Options{ConcurrentEphemeralVolumeSyncs: -1},
			[]string{"got -1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			controllertest.CheckBuild(t, ephemeral.Descriptor(tt.o), tt.wantErr...)
		})
	}
}

func TestCheckRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t, ephemeral.Descriptor(ephemeral.NewOptions()))
}

// TestManagerCreatesClaims: under a Manager a pod's ephemeral volume gets
// its claim, and gets it again when it is deleted.
func TestManagerCreatesClaims(t *testing.T) {
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1"},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data",
			VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
				VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
					Spec: corev1.PersistentVolumeClaimSpec{
						Resources: corev1.VolumeResourceRequirements{
							Requests: corev1.ResourceList{
								corev1.ResourceStorage: resource.MustParse("1Gi")}}}}}}}}}}
	h := managertest.New(t, "test",
		[]descriptor.Descriptor{ephemeral.Descriptor(ephemeral.NewOptions())}, web).Start()
	claims := h.Client.CoreV1().PersistentVolumeClaims("ns")
	created := func() bool {
		c, err := claims.Get(t.Context(), "web-data", metav1.GetOptions{})
		return err == nil && c.Labels["app"] == "web" && metav1.IsControlledBy(c, web)
	}
	managertest.Eventually(t, "the claim created", created)
	if err := claims.Delete(t.Context(), "web-data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "the claim created again", created)
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
