package contract

import (
	"context"
	"fmt"
	"net/http"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

var generationRows = []Row{{
	Name:    "generation/config-map-has-none",
	Promise: "a ConfigMap has no metadata.generation: it stays 0 through create and update",
	Run: func(ctx context.Context, e *Env) error {
		cm, err := e.configMaps().Create(ctx, configMap("a", "k", "1"), metav1.CreateOptions{})
		if err != nil {
			return step("create", err)
		}
		if err := wantGeneration("create", cm, 0); err != nil {
			return err
		}
		cm.Data["k"] = "2"
		if cm, err = e.configMaps().Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return step("update", err)
		}
		return wantGeneration("a change of data", cm, 0)
	},
}, {
	Name: "generation/custom-resource-with-status",
	Promise: "a custom resource with a status subresource gets generation 1, bumped by a " +
		"change of spec, not by a change of status or metadata",
	Run: func(ctx context.Context, e *Env) error {
		return generationSteps(ctx, e, Widgets, 1, 1, 2)
	},
}, {
	Name: "generation/custom-resource-without-status",
	Promise: "a custom resource without a status subresource gets generation 1, bumped by " +
		"any change outside metadata, status included",
	Run: func(ctx context.Context, e *Env) error {
		return generationSteps(ctx, e, Gadgets, 1, 2, 3)
	},
}, {
	Name: "generation/deployment",
	Promise: "a Deployment gets generation 1, bumped by a change of spec or of its " +
		"annotations, not by labels or status",
	Run: func(ctx context.Context, e *Env) error {
		deps := e.Kube.AppsV1().Deployments(e.Namespace)
		d, err := deps.Create(ctx, deployment("d"), metav1.CreateOptions{})
		if err != nil {
			return step("create", err)
		}
		if err := wantGeneration("create", d, 1); err != nil {
			return err
		}
		d.Labels = map[string]string{"l": "1"}
		if d, err = deps.Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			return step("label update", err)
		}
		if err := wantGeneration("a change of labels", d, 1); err != nil {
			return err
		}
		d.Status.ObservedGeneration = 1
		if d, err = deps.UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
			return step("status update", err)
		}
		if err := wantGeneration("a change of status", d, 1); err != nil {
			return err
		}
		d.Annotations = map[string]string{"a": "1"}
		if d, err = deps.Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			return step("annotation update", err)
		}
		if err := wantGeneration("a change of annotations", d, 2); err != nil {
			return err
		}
		d.Spec.Replicas = ptr.To[int32](3)
		if d, err = deps.Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			return step("spec update", err)
		}
		return wantGeneration("a change of spec", d, 3)
	},
}, {
	Name: "generation/replica-set-and-pod",
	Promise: "a ReplicaSet and a Pod get generation 1, bumped by a change of spec, not by " +
		"annotations",
	Run: func(ctx context.Context, e *Env) error {
		rss := e.Kube.AppsV1().ReplicaSets(e.Namespace)
		rs, err := rss.Create(ctx, replicaSet("r"), metav1.CreateOptions{})
		if err != nil {
			return step("create", err)
		}
		rs.Annotations = map[string]string{"a": "1"}
		if rs, err = rss.Update(ctx, rs, metav1.UpdateOptions{}); err != nil {
			return step("annotation update", err)
		}
		if err := wantGeneration("a ReplicaSet's change of annotations", rs, 1); err != nil {
			return err
		}
		rs.Spec.Replicas = ptr.To[int32](2)
		if rs, err = rss.Update(ctx, rs, metav1.UpdateOptions{}); err != nil {
			return step("spec update", err)
		}
		if err := wantGeneration("a ReplicaSet's change of spec", rs, 2); err != nil {
			return err
		}
		pods := e.Kube.CoreV1().Pods(e.Namespace)
		p, err := e.createPod(ctx, pod("p", ""))
		if err != nil {
			return step("create pod", err)
		}
		if err := wantGeneration("a Pod's create", p, 1); err != nil {
			return err
		}
		p.Annotations = map[string]string{"a": "1"}
		if p, err = pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			return step("pod annotation update", err)
		}
		if err := wantGeneration("a Pod's change of annotations", p, 1); err != nil {
			return err
		}
		p.Spec.ActiveDeadlineSeconds = ptr.To[int64](600)
		if p, err = pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			return step("pod spec update", err)
		}
		return wantGeneration("a Pod's change of spec", p, 2)
	},
}}

// generationSteps creates an object of r, changes its labels, then its
// status, then its spec, checking the generation after each of the last
// three.
func generationSteps(ctx context.Context, e *Env, r CustomResource,
	afterLabels, afterStatus, afterSpec int64) error {
	c := e.of(r)
	o, err := c.Create(ctx, custom(r, "o", spec("size", int64(1))), metav1.CreateOptions{})
	if err != nil {
		return step("create", err)
	}
	if err := wantGeneration("create", o, 1); err != nil {
		return err
	}
	o.SetLabels(map[string]string{"l": "1"})
	if o, err = c.Update(ctx, o, metav1.UpdateOptions{}); err != nil {
		return step("label update", err)
	}
	if err := wantGeneration("a change of labels", o, afterLabels); err != nil {
		return err
	}
	o.Object["status"] = map[string]any{"seen": int64(1)}
	if r.Status {
		o, err = c.UpdateStatus(ctx, o, metav1.UpdateOptions{})
	} else {
		o, err = c.Update(ctx, o, metav1.UpdateOptions{})
	}
	if err != nil {
		return step("status update", err)
	}
	if err := wantGeneration("a change of status", o, afterStatus); err != nil {
		return err
	}
	if err := unstructured.SetNestedField(o.Object, int64(2), "spec", "size"); err != nil {
		return err
	}
	if o, err = c.Update(ctx, o, metav1.UpdateOptions{}); err != nil {
		return step("spec update", err)
	}
	return wantGeneration("a change of spec", o, afterSpec)
}

var podLabels = map[string]string{"app": "contract"}

func podSpec() corev1.PodSpec {
	return corev1.PodSpec{
		AutomountServiceAccountToken: ptr.To(false),
		Containers: []corev1.Container{
			{Name: "c", Image: "registry.k8s.io/pause:3.10"},
		},
	}
}

// pod is a Pod named name, bound to node unless it is empty.
func pod(name, node string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: podLabels}, Spec: podSpec()}
	p.Spec.NodeName = node
	return p
}

func deployment(name string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: podSpec()},
		}}
}

func replicaSet(name string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: podSpec()},
		}}
}

// createPod creates p in e's namespace, and the default ServiceAccount
// that pod admission needs first (no controller manager makes it).
func (e *Env) createPod(ctx context.Context, p *corev1.Pod) (*corev1.Pod, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	_, err := e.Kube.CoreV1().ServiceAccounts(e.Namespace).Create(ctx, sa, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating the default ServiceAccount: %w", err)
	}
	return e.Kube.CoreV1().Pods(e.Namespace).Create(ctx, p, metav1.CreateOptions{})
}

var statusRows = []Row{{
	Name: "status/update-changes-only-status",
	Promise: "an update of a custom resource's status subresource changes its status only: " +
		"spec and metadata in the body are ignored",
	Run: func(ctx context.Context, e *Env) error {
		w, err := e.of(Widgets).Create(ctx, custom(Widgets, "w", spec("size", int64(1))),
			metav1.CreateOptions{})
		if err != nil {
			return step("create", err)
		}
		w.Object["status"] = map[string]any{"seen": int64(1)}
		w.Object["spec"] = map[string]any{"size": int64(9)}
		w.SetLabels(map[string]string{"l": "1"})
		got, err := e.of(Widgets).UpdateStatus(ctx, w, metav1.UpdateOptions{})
		if err != nil {
			return step("status update", err)
		}
		size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size")
		seen, _, _ := unstructured.NestedInt64(got.Object, "status", "seen")
		if size != 1 || seen != 1 || len(got.GetLabels()) != 0 {
			return fmt.Errorf("spec.size %d, status.seen %d, labels %v; want 1, 1 and none",
				size, seen, got.GetLabels())
		}
		return nil
	},
}, {
	Name:    "status/update-of-object-keeps-status",
	Promise: "an update of an object with a status subresource keeps the stored status",
	Run: func(ctx context.Context, e *Env) error {
		w, err := e.of(Widgets).Create(ctx, custom(Widgets, "w", spec("size", int64(1))),
			metav1.CreateOptions{})
		if err != nil {
			return step("create", err)
		}
		w.Object["status"] = map[string]any{"seen": int64(1)}
		if w, err = e.of(Widgets).UpdateStatus(ctx, w, metav1.UpdateOptions{}); err != nil {
			return step("status update", err)
		}
		w.Object["status"] = map[string]any{"seen": int64(5)}
		got, err := e.of(Widgets).Update(ctx, w, metav1.UpdateOptions{})
		if err != nil {
			return step("update", err)
		}
		if seen, _, _ := unstructured.NestedInt64(got.Object, "status", "seen"); seen != 1 {
			return fmt.Errorf("status.seen %d after an update of the object, want 1 kept", seen)
		}
		return nil
	},
}, {
	Name: "status/without-subresource-is-data",
	Promise: "a custom resource without a status subresource stores status as any field, " +
		"and its .../status path is 404",
	Run: func(ctx context.Context, e *Env) error {
		g := custom(Gadgets, "g", map[string]any{"status": map[string]any{"seen": int64(1)}})
		got, err := e.of(Gadgets).Create(ctx, g, metav1.CreateOptions{})
		if err != nil {
			return step("create", err)
		}
		if seen, _, _ := unstructured.NestedInt64(got.Object, "status", "seen"); seen != 1 {
			return fmt.Errorf("status.seen %d after create, want 1", seen)
		}
		_, err = e.of(Gadgets).UpdateStatus(ctx, got, metav1.UpdateOptions{})
		return wantStatus("status update", err, http.StatusNotFound, metav1.StatusReasonNotFound)
	},
}}
