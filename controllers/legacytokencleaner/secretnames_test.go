package legacytokencleaner

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

// TestSecretNamesOfCachedPods: every kind of Secret reference KCM visits
// is found in a pod as the descriptor's informer caches it (pruned to its
// declared reads), and nothing else is taken for one.
func TestSecretNamesOfCachedPods(t *testing.T) {
	ref := &corev1.LocalObjectReference{Name: "s"}
	env := []corev1.EnvVar{{Name: "E", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: *ref, Key: "k"}}},
		{Name: "C", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "k"}}},
		{Name: "V", Value: "plain"}}
	envFrom := []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
		LocalObjectReference: *ref}}, {ConfigMapRef: &corev1.ConfigMapEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}}
	vol := func(src corev1.VolumeSource) corev1.PodSpec {
		return corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: src}}}
	}
	tests := []struct {
		name string
		spec corev1.PodSpec
		want bool // whether "s" is found
	}{
		{"image pull secret", corev1.PodSpec{ImagePullSecrets: []corev1.LocalObjectReference{*ref}},
			true},
		{"container env", corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Env: env}}},
			true},
		{"container envFrom", corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
			EnvFrom: envFrom}}}, true},
		{"init container env", corev1.PodSpec{InitContainers: []corev1.Container{{Name: "c",
			Env: env}}}, true},
		{"init container envFrom", corev1.PodSpec{InitContainers: []corev1.Container{{
			Name: "c", EnvFrom: envFrom}}}, true},
		{"ephemeral container env", corev1.PodSpec{EphemeralContainers: []corev1.EphemeralContainer{
			{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "c", Env: env}}}},
			true},
		{"ephemeral container envFrom", corev1.PodSpec{
			EphemeralContainers: []corev1.EphemeralContainer{{
				EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "c",
					EnvFrom: envFrom}}}}, true},
		{"secret volume", vol(corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: "s"}}), true},
		{"projected secret", vol(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "t"}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: *ref}}}}}), true},
		{"azure file", vol(corev1.VolumeSource{AzureFile: &corev1.AzureFileVolumeSource{
			SecretName: "s", ShareName: "x"}}), true},
		{"cephfs", vol(corev1.VolumeSource{CephFS: &corev1.CephFSVolumeSource{
			Monitors: []string{"m"}, SecretRef: ref}}), true},
		{"cinder", vol(corev1.VolumeSource{Cinder: &corev1.CinderVolumeSource{VolumeID: "x",
			SecretRef: ref}}), true},
		{"flex", vol(corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{Driver: "d",
			SecretRef: ref}}), true},
		{"rbd", vol(corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{CephMonitors: []string{"m"},
			SecretRef: ref}}), true},
		{"scaleio", vol(corev1.VolumeSource{ScaleIO: &corev1.ScaleIOVolumeSource{Gateway: "g",
			SecretRef: ref}}), true},
		{"iscsi", vol(corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: "p",
			SecretRef: ref}}), true},
		{"storageos", vol(corev1.VolumeSource{StorageOS: &corev1.StorageOSVolumeSource{
			VolumeName: "v", SecretRef: ref}}), true},
		{"csi", vol(corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d",
			NodePublishSecretRef: ref}}), true},
		{"cephfs without a secret", vol(corev1.VolumeSource{CephFS: &corev1.CephFSVolumeSource{
			Monitors: []string{"m"}}}), false},
		{"configmap volume", vol(corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: *ref}}), false},
		{"container env of configmaps and values", corev1.PodSpec{Containers: []corev1.Container{
			{Name: "c", Env: env[1:], EnvFrom: envFrom[1:]}}}, false},
		{"empty secret name", vol(corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{}}),
			false},
		// Only references KCM visits: a persistent volume's secret (through
		// its claim) is not a pod's.
		{"claim", vol(corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "s"}}),
			false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &corev1.Pod{Spec: tt.spec}
			p.Namespace, p.Name = "ns", "p"
			cached := controllertest.Pruned(t, Descriptor(NewOptions()), p)[0]
			got := secretNames(cached)
			if slices.Contains(got, "s") != tt.want {
				t.Errorf("secretNames of the cached pod = %q, want \"s\" found: %v", got, tt.want)
			}
			if slices.Contains(got, "cm") || slices.Contains(got, "") {
				t.Errorf("secretNames = %q, includes a ConfigMap or an empty name", got)
			}
			if !slices.Equal(got, secretNames(p)) {
				t.Errorf("the cached pod names %q, the whole pod %q", got, secretNames(p))
			}
		})
	}
}
