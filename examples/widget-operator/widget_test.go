package main

import (
	"context"
	"slices"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"

	"github.com/ctrlhost/ctrlhost/examples/widget-operator/api/v1alpha1"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startOperator runs the operator's controllers over managertest's
// in-memory API server, serving Widgets, seeded with objects.
func startOperator(t *testing.T, objects ...runtime.Object) *managertest.Harness {
	h := managertest.NewAPI(t, "widget-operator", descriptors())
	h.API.Serve(v1alpha1.Resource, v1alpha1.Kind.Kind)
	for _, obj := range objects {
		if err := h.API.Create(obj); err != nil {
			t.Fatal(err)
		}
	}
	h.Start()
	h.WaitRunning("widget-controller", "secret-requeuer")
	return h
}

func newWidget(name string, data map[string]string) *v1alpha1.Widget {
	return &v1alpha1.Widget{
		TypeMeta: metav1.TypeMeta{
			APIVersion: v1alpha1.GroupVersion.String(),
			Kind:       v1alpha1.Kind.Kind,
		},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec:       v1alpha1.WidgetSpec{Data: data},
	}
}

func newSecret(name, widget string, keys ...string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
		Labels: map[string]string{widgetLabel: widget}}, Data: map[string][]byte{}}
	for _, k := range keys {
		s.Data[k] = []byte("x")
	}
	return s
}

// getWidget reads a Widget from the API server; nil if it is gone.
func getWidget(t *testing.T, h *managertest.Harness, name string) *v1alpha1.Widget {
	u := h.API.Get(v1alpha1.Resource, "ns", name)
	if u == nil {
		return nil
	}
	w := &v1alpha1.Widget{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, w); err != nil {
		t.Fatal(err)
	}
	return w
}

// waitSecretKeys waits until the named Widget's ConfigMap lists keys and
// its status agrees.
func waitSecretKeys(t *testing.T, h *managertest.Harness, name, keys string, n int) {
	t.Helper()
	managertest.Eventually(t, name+"'s secret-keys "+keys, func() bool {
		cm, err := h.API.Kube().
			CoreV1().
			ConfigMaps("ns").
			Get(context.Background(), name, metav1.GetOptions{})
		w := getWidget(t, h, name)
		return err == nil && cm.Data[secretKeys] == keys && w.Status.SecretKeys == n
	})
}

func TestWidgetOwnsConfigMap(t *testing.T) {
	h := startOperator(
		t,
		newWidget("w", map[string]string{"a": "1"}),
		newSecret(
			"s1",
			"w",
			"k1",
			"k2",
		),
		newSecret("s2", "w", "k2", "k3"),
		newSecret("s3", "v", "k9"),
	)
	waitSecretKeys(t, h, "w", "k1,k2,k3", 3)

	w := getWidget(t, h, "w")
	cm, err := h.API.Kube().CoreV1().ConfigMaps("ns").Get(t.Context(), "w", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["a"] != "1" {
		t.Errorf("ConfigMap data = %v, want spec.data in it", cm.Data)
	}
	ref := metav1.GetControllerOf(cm)
	if ref == nil || ref.UID != w.UID || ref.Kind != "Widget" || ref.BlockOwnerDeletion == nil ||
		!*ref.BlockOwnerDeletion {
		t.Errorf(
			"ConfigMap's controller reference = %+v, want the Widget's, blocking deletion",
			ref,
		)
	}
	ready := meta.FindStatusCondition(w.Status.Conditions, "Ready")
	if w.Status.ConfigMap != "w" || ready == nil || ready.Status != metav1.ConditionTrue ||
		ready.ObservedGeneration != w.Generation {
		t.Errorf(
			"status = %+v, want configMap w and Ready at generation %d",
			w.Status,
			w.Generation,
		)
	}
	if !slices.Contains(w.Finalizers, finalizer) {
		t.Errorf("finalizers = %v, want %s", w.Finalizers, finalizer)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// The secret-requeuer hands widget-controller the Widget a Secret is
// labelled for before and after each change: a relabelled Secret updates
// both Widgets.
func TestSecretChangeRequeuesWidget(t *testing.T) {
	h := startOperator(t, newWidget("w", nil), newWidget("v", nil), newSecret("s1", "w", "k1"))
	waitSecretKeys(t, h, "w", "k1", 1)
	secrets := h.API.Kube().CoreV1().Secrets("ns")
	if _, err := secrets.Create(t.Context(), newSecret("s2", "w", "k2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSecretKeys(t, h, "w", "k1,k2", 2)

	if _, err := secrets.Update(t.Context(), newSecret("s1", "v", "k1"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSecretKeys(t, h, "w", "k2", 1)
	waitSecretKeys(t, h, "v", "k1", 1)
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestSpecChangeUpdatesConfigMap(t *testing.T) {
	h := startOperator(t, newWidget("w", map[string]string{"a": "1"}))
	waitSecretKeys(t, h, "w", "", 0)
	// The controller may still be writing the Widget (its finalizer, its
	// status): a conflict is the API server's answer to that, and a client
	// reads again and retries, as any user of the CRD would.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		w := getWidget(t, h, "w")
		w.Spec.Data = map[string]string{"a": "2"}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(w)
		if err != nil {
			return err
		}
		_, err = h.API.Dynamic().Resource(v1alpha1.Resource).Namespace("ns").Update(t.Context(),
			&unstructured.Unstructured{Object: u}, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "the ConfigMap and Ready following generation 2", func() bool {
		cm, err := h.API.Kube().CoreV1().ConfigMaps("ns").Get(t.Context(), "w", metav1.GetOptions{})
		ready := meta.FindStatusCondition(getWidget(t, h, "w").Status.Conditions, "Ready")
		return err == nil && cm.Data["a"] == "2" && ready != nil && ready.ObservedGeneration == 2
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// Deleting a Widget runs its finalizer: its Secrets lose their label, then
// it goes. (Its ConfigMap stays here: the in-memory API server has no
// garbage collector; TestGarbageCollectorDeletesConfigMap runs one.)
func TestDeletionReleasesSecrets(t *testing.T) {
	h := startOperator(t, newWidget("w", nil), newSecret("s1", "w", "k1"))
	waitSecretKeys(t, h, "w", "k1", 1)
	if err := h.API.Dynamic().Resource(v1alpha1.Resource).Namespace("ns").Delete(t.Context(), "w",
		metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "the Widget gone and s1 unlabelled", func() bool {
		s, err := h.API.Kube().CoreV1().Secrets("ns").Get(t.Context(), "s1", metav1.GetOptions{})
		return err == nil && s.Labels[widgetLabel] == "" && getWidget(t, h, "w") == nil
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
