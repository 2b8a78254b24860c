//go:build integration

package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// holdFinalizer keeps a dependent from going until the test removes it.
const holdFinalizer = "e2e.ctrlhost.io/hold"

// TestGarbageCollectorBackground: deleting an owner in the background
// takes its dependents with it — ConfigMaps owned by a ConfigMap, and a
// Deployment's ReplicaSet and pods.
func TestGarbageCollectorBackground(t *testing.T) {
	t.Parallel()
	cs, ns := setup(t)
	ctx := t.Context()
	owner := configMap(t, cs, ns, "owner", nil)
	configMap(t, cs, ns, "dep-1", ownedBy(owner, false))
	configMap(t, cs, ns, "dep-2", ownedBy(owner, false))
	sel := map[string]string{"app": "gc"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "gc"},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: podTemplate(sel, corev1.RestartPolicyAlways),
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, "the Deployment's ReplicaSet and 2 pods", func(ctx context.Context) error {
		return counts(ctx, cs, ns, 1, 2)
	})

	background := metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationBackground)}
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "owner", background); err != nil {
		t.Fatal(err)
	}
	if err := cs.AppsV1().Deployments(ns).Delete(ctx, "gc", background); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, "the dependents to be collected", func(ctx context.Context) error {
		for _, name := range []string{"dep-1", "dep-2"} {
			_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
			if err := gone(err); err != nil {
				return fmt.Errorf("ConfigMap %s: %w", name, err)
			}
		}
		return counts(ctx, cs, ns, 0, 0)
	})
}

// counts is nil when ns holds exactly rs ReplicaSets and pods pods.
func counts(ctx context.Context, cs kubernetes.Interface, ns string, rs, pods int) error {
	rsl, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	pl, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if len(rsl.Items) != rs || len(pl.Items) != pods {
		return fmt.Errorf("%d ReplicaSets and %d pods, want %d and %d", len(rsl.Items), len(pl.Items), rs, pods)
	}
	return nil
}

// TestGarbageCollectorForeground: an owner deleted in the foreground keeps
// the foregroundDeletion finalizer while a blocking dependent exists (here
// held by a finalizer of the test's), and goes once the dependent is gone.
func TestGarbageCollectorForeground(t *testing.T) {
	t.Parallel()
	cs, ns := setup(t)
	ctx := t.Context()
	owner := configMap(t, cs, ns, "owner", nil)
	held := configMap(t, cs, ns, "held", ownedBy(owner, true))
	held.Finalizers = []string{holdFinalizer}
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, held, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	configMap(t, cs, ns, "free", ownedBy(owner, true))

	foreground := metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationForeground)}
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "owner", foreground); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, "the collector to delete the dependents", func(ctx context.Context) error {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "free", metav1.GetOptions{})
		if err := gone(err); err != nil {
			return fmt.Errorf("ConfigMap free: %w", err)
		}
		h, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "held", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h.DeletionTimestamp == nil {
			return errors.New("ConfigMap held is not being deleted")
		}
		return nil
	})
	o, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "owner", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the owner went while its blocking dependent remains: %v", err)
	}
	if o.DeletionTimestamp == nil || !slices.Contains(o.Finalizers, metav1.FinalizerDeleteDependents) {
		t.Fatalf("owner: deletion timestamp %v, finalizers %q; want it being deleted with %q",
			o.DeletionTimestamp, o.Finalizers, metav1.FinalizerDeleteDependents)
	}

	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, "held", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, "the owner to go after its last dependent", func(ctx context.Context) error {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "owner", metav1.GetOptions{})
		return gone(err)
	})
}

// TestGarbageCollectorOrphan: an owner deleted with the orphan policy goes;
// its dependents stay, without the owner reference.
func TestGarbageCollectorOrphan(t *testing.T) {
	t.Parallel()
	cs, ns := setup(t)
	ctx := t.Context()
	owner := configMap(t, cs, ns, "owner", nil)
	configMap(t, cs, ns, "dep-1", ownedBy(owner, false))
	configMap(t, cs, ns, "dep-2", ownedBy(owner, true))
	orphan := metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationOrphan)}
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "owner", orphan); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, "the owner to go and its dependents to be orphaned", func(ctx context.Context) error {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "owner", metav1.GetOptions{})
		if err := gone(err); err != nil {
			return fmt.Errorf("owner: %w", err)
		}
		for _, name := range []string{"dep-1", "dep-2"} {
			cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("dependent %s: %w", name, err)
			}
			if len(cm.OwnerReferences) != 0 || cm.DeletionTimestamp != nil {
				return fmt.Errorf("dependent %s: owner references %v, deletion timestamp %v", name, cm.OwnerReferences, cm.DeletionTimestamp)
			}
		}
		return nil
	})
}

// TestNamespaceDeletion: a namespace with ConfigMaps and a Deployment (its
// ReplicaSet and pods) is emptied and then removed.
func TestNamespaceDeletion(t *testing.T) {
	t.Parallel()
	cs, ns := setup(t)
	ctx := t.Context()
	for _, name := range []string{"a", "b", "c"} {
		configMap(t, cs, ns, name, nil)
	}
	sel := map[string]string{"app": "doomed"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "doomed"},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: podTemplate(sel, corev1.RestartPolicyAlways),
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, "the Deployment's ReplicaSet and 2 pods", func(ctx context.Context) error {
		return counts(ctx, cs, ns, 1, 2)
	})
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, "namespace "+ns+" to be removed", func(ctx context.Context) error {
		n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("phase %s, conditions %v", n.Status.Phase, n.Status.Conditions)
		}
		return gone(err)
	})
}

// configMap creates a ConfigMap with the given owner references.
func configMap(t *testing.T, cs kubernetes.Interface, ns, name string, owners []metav1.OwnerReference) *corev1.ConfigMap {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: owners},
		Data:       map[string]string{"k": "v"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func ownedBy(owner *corev1.ConfigMap, block bool) []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
		BlockOwnerDeletion: new(block),
	}}
}
