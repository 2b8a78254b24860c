package legacytokencleaner

import corev1 "k8s.io/api/core/v1"

// secretNames returns the names of the Secrets p refers to (some may
// repeat): its image pull secrets, the env and envFrom references of all
// its containers (init and ephemeral ones too), and its volumes' Secret
// references, as KCM's pod utilities visit them. Empty names are left out.
func secretNames(p *corev1.Pod) []string {
	var out []string
	add := func(name string) {
		if name != "" {
			out = append(out, name)
		}
	}
	for _, r := range p.Spec.ImagePullSecrets {
		add(r.Name)
	}
	envs := func(env []corev1.EnvVar, from []corev1.EnvFromSource) {
		for _, f := range from {
			if f.SecretRef != nil {
				add(f.SecretRef.Name)
			}
		}
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				add(e.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	for i := range p.Spec.InitContainers {
		envs(p.Spec.InitContainers[i].Env, p.Spec.InitContainers[i].EnvFrom)
	}
	for i := range p.Spec.Containers {
		envs(p.Spec.Containers[i].Env, p.Spec.Containers[i].EnvFrom)
	}
	for i := range p.Spec.EphemeralContainers {
		envs(p.Spec.EphemeralContainers[i].Env, p.Spec.EphemeralContainers[i].EnvFrom)
	}
	for i := range p.Spec.Volumes {
		volumeSecret(&p.Spec.Volumes[i].VolumeSource, add)
	}
	return out
}

// volumeSecret passes the Secrets v refers to to add. Only the first
// source set is looked at, in KCM's order (a valid volume has one).
func volumeSecret(v *corev1.VolumeSource, add func(string)) {
	ref := func(r *corev1.LocalObjectReference) {
		if r != nil {
			add(r.Name)
		}
	}
	switch {
	case v.AzureFile != nil:
		add(v.AzureFile.SecretName)
	case v.CephFS != nil:
		ref(v.CephFS.SecretRef)
	case v.Cinder != nil:
		ref(v.Cinder.SecretRef)
	case v.FlexVolume != nil:
		ref(v.FlexVolume.SecretRef)
	case v.Projected != nil:
		for _, s := range v.Projected.Sources {
			if s.Secret != nil {
				add(s.Secret.Name)
			}
		}
	case v.RBD != nil:
		ref(v.RBD.SecretRef)
	case v.Secret != nil:
		add(v.Secret.SecretName)
	case v.ScaleIO != nil:
		ref(v.ScaleIO.SecretRef)
	case v.ISCSI != nil:
		ref(v.ISCSI.SecretRef)
	case v.StorageOS != nil:
		ref(v.StorageOS.SecretRef)
	case v.CSI != nil:
		ref(v.CSI.NodePublishSecretRef)
	}
}
