package main

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ctrlhost/ctrlhost/examples/widget-operator/controllerruntime/api/v1alpha1"
)

const testNamespace = "ns"

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// newReconciler returns a widget reconciler on a fake client holding objs.
func newReconciler(t *testing.T, objs ...client.Object) *WidgetReconciler {
	t.Helper()
	scheme := newScheme(t)
	c := fake.NewClientBuilder().
		WithScheme(scheme).
		WithStatusSubresource(&v1alpha1.Widget{}).
		WithObjects(objs...).
		Build()
	return &WidgetReconciler{Client: c, Scheme: scheme}
}

func newWidget(name string, data map[string]string) *v1alpha1.Widget {
	return &v1alpha1.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name, Generation: 1},
		Spec:       v1alpha1.WidgetSpec{Data: data},
	}
}

// newSecret returns a Secret with the given keys, labelled for widget unless it is "".
func newSecret(name, widget string, keys ...string) *corev1.Secret {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name},
		Data:       map[string][]byte{},
	}
	if widget != "" {
		secret.Labels = map[string]string{widgetLabel: widget}
	}
	for _, key := range keys {
		secret.Data[key] = []byte("x")
	}
	return secret
}

func reconcileWidget(t *testing.T, r *WidgetReconciler, name string) {
	t.Helper()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: testNamespace, Name: name}}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatalf("reconcile %s: %v", name, err)
	}
}

func getWidget(t *testing.T, c client.Client, name string) *v1alpha1.Widget {
	t.Helper()
	var widget v1alpha1.Widget
	key := types.NamespacedName{Namespace: testNamespace, Name: name}
	if err := c.Get(context.Background(), key, &widget); err != nil {
		t.Fatalf("get widget %s: %v", name, err)
	}
	return &widget
}

func getConfigMap(t *testing.T, c client.Client, name string) *corev1.ConfigMap {
	t.Helper()
	var configMap corev1.ConfigMap
	key := types.NamespacedName{Namespace: testNamespace, Name: name}
	if err := c.Get(context.Background(), key, &configMap); err != nil {
		t.Fatalf("get configmap %s: %v", name, err)
	}
	return &configMap
}

// checkReady fails t unless widget reports Ready=True for its current generation.
func checkReady(t *testing.T, widget *v1alpha1.Widget) {
	t.Helper()
	ready := meta.FindStatusCondition(widget.Status.Conditions, conditionReady)
	switch {
	case ready == nil:
		t.Fatalf("widget %s has no Ready condition", widget.Name)
	case ready.Status != metav1.ConditionTrue || ready.Reason != "Reconciled":
		t.Fatalf("Ready = %s/%s (%s), want True/Reconciled", ready.Status, ready.Reason,
			ready.Message)
	case ready.ObservedGeneration != widget.Generation:
		t.Fatalf("Ready.observedGeneration = %d, want %d", ready.ObservedGeneration,
			widget.Generation)
	}
}

func checkData(t *testing.T, configMap *corev1.ConfigMap, want map[string]string) {
	t.Helper()
	if !maps.Equal(configMap.Data, want) {
		t.Fatalf("configmap data = %v, want %v", configMap.Data, want)
	}
}

// requeuedWidgets passes the update of a Secret from old to new through the secret
// controller (its event handler, a work queue and its reconciler) and returns the
// Widgets it sends to the widget controller, sorted.
func requeuedWidgets(t *testing.T, old, new *corev1.Secret) []types.NamespacedName {
	t.Helper()
	ctx := context.Background()
	queue := workqueue.NewTypedRateLimitingQueue(
		workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer queue.ShutDown()
	widgets := make(chan event.GenericEvent, 10)
	r := &SecretReconciler{Widgets: widgets}

	secretHandler().Update(ctx, event.UpdateEvent{ObjectOld: old, ObjectNew: new}, queue)
	var got []types.NamespacedName
	for queue.Len() > 0 {
		req, _ := queue.Get()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatalf("reconcile secret event %s: %v", req, err)
		}
		queue.Done(req)
		select {
		case ev := <-widgets:
			got = append(got, client.ObjectKeyFromObject(ev.Object))
		default:
			t.Fatalf("no widget requeued for %s", req)
		}
	}
	slices.SortFunc(got, func(a, b types.NamespacedName) int {
		return strings.Compare(a.String(), b.String())
	})
	return got
}

func TestWidgetOwnsConfigMap(t *testing.T) {
	widget := newWidget("w", map[string]string{"a": "1"})
	r := newReconciler(t, widget,
		newSecret("s1", "w", "k1", "k2"),
		newSecret("s2", "w", "k2", "k3"),
		newSecret("unrelated", "", "k4"))

	reconcileWidget(t, r, "w")

	configMap := getConfigMap(t, r.Client, "w")
	checkData(t, configMap, map[string]string{"a": "1", secretKeysKey: "k1,k2,k3"})
	owner := metav1.GetControllerOf(configMap)
	if owner == nil || owner.Kind != "Widget" || owner.Name != "w" {
		t.Fatalf("configmap controller = %+v, want Widget w", owner)
	}

	widget = getWidget(t, r.Client, "w")
	if widget.Status.ConfigMap != "w" || widget.Status.SecretKeys != 3 {
		t.Fatalf("status = %+v, want configMap w and 3 secret keys", widget.Status)
	}
	checkReady(t, widget)
	if !controllerutil.ContainsFinalizer(widget, widgetFinalizer) {
		t.Fatalf("finalizers = %v, want %s", widget.Finalizers, widgetFinalizer)
	}

	// A second pass changes nothing.
	resourceVersion := widget.ResourceVersion
	reconcileWidget(t, r, "w")
	if widget = getWidget(t, r.Client, "w"); widget.ResourceVersion != resourceVersion {
		t.Fatalf("second reconcile wrote the widget")
	}
}

func TestSecretChangeRequeuesWidget(t *testing.T) {
	ctx := context.Background()
	r := newReconciler(t, newWidget("w", nil), newSecret("s1", "w", "k1"))
	reconcileWidget(t, r, "w")
	checkData(t, getConfigMap(t, r.Client, "w"), map[string]string{secretKeysKey: "k1"})

	// Labelling a Secret for w requeues w.
	unlabelled := newSecret("s2", "", "k2")
	if err := r.Create(ctx, unlabelled); err != nil {
		t.Fatal(err)
	}
	labelled := unlabelled.DeepCopy()
	labelled.Labels = map[string]string{widgetLabel: "w"}
	if err := r.Update(ctx, labelled); err != nil {
		t.Fatal(err)
	}
	w := types.NamespacedName{Namespace: testNamespace, Name: "w"}
	want := []types.NamespacedName{w}
	if got := requeuedWidgets(t, unlabelled, labelled); !slices.Equal(got, want) {
		t.Fatalf("requeued %v, want %v", got, want)
	}

	reconcileWidget(t, r, "w")
	checkData(t, getConfigMap(t, r.Client, "w"), map[string]string{secretKeysKey: "k1,k2"})
	widget := getWidget(t, r.Client, "w")
	if widget.Status.SecretKeys != 2 {
		t.Fatalf("status.secretKeys = %d, want 2", widget.Status.SecretKeys)
	}
	checkReady(t, widget)

	// Moving the Secret to another Widget requeues both.
	moved := labelled.DeepCopy()
	moved.Labels[widgetLabel] = "other"
	other := types.NamespacedName{Namespace: testNamespace, Name: "other"}
	want = []types.NamespacedName{other, w}
	if got := requeuedWidgets(t, labelled, moved); !slices.Equal(got, want) {
		t.Fatalf("requeued %v, want %v", got, want)
	}
}

func TestSpecChangeUpdatesConfigMap(t *testing.T) {
	ctx := context.Background()
	r := newReconciler(t, newWidget("w", map[string]string{"a": "1"}))
	reconcileWidget(t, r, "w")
	checkData(t, getConfigMap(t, r.Client, "w"), map[string]string{"a": "1", secretKeysKey: ""})

	// The fake client does not bump the generation, so do it as the API server would.
	widget := getWidget(t, r.Client, "w")
	widget.Spec.Data = map[string]string{"a": "2", "b": "3"}
	widget.Generation++
	if err := r.Update(ctx, widget); err != nil {
		t.Fatal(err)
	}
	reconcileWidget(t, r, "w")

	checkData(t, getConfigMap(t, r.Client, "w"),
		map[string]string{"a": "2", "b": "3", secretKeysKey: ""})
	widget = getWidget(t, r.Client, "w")
	if widget.Generation != 2 {
		t.Fatalf("generation = %d, want 2", widget.Generation)
	}
	checkReady(t, widget)
}

func TestDeletionReleasesSecrets(t *testing.T) {
	ctx := context.Background()
	r := newReconciler(t, newWidget("w", nil),
		newSecret("s1", "w", "k1"),
		newSecret("s2", "w", "k2"),
		newSecret("s3", "other", "k3"))
	reconcileWidget(t, r, "w")

	if err := r.Delete(ctx, getWidget(t, r.Client, "w")); err != nil {
		t.Fatal(err)
	}
	if widget := getWidget(t, r.Client, "w"); widget.DeletionTimestamp.IsZero() {
		t.Fatal("widget deleted before its finalizer ran")
	}
	reconcileWidget(t, r, "w")

	err := r.Get(ctx, types.NamespacedName{Namespace: testNamespace, Name: "w"},
		&v1alpha1.Widget{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("get deleted widget: %v, want NotFound", err)
	}
	for name, want := range map[string]string{"s1": "", "s2": "", "s3": "other"} {
		var secret corev1.Secret
		key := types.NamespacedName{Namespace: testNamespace, Name: name}
		if err := r.Get(ctx, key, &secret); err != nil {
			t.Fatal(err)
		}
		if got := secret.Labels[widgetLabel]; got != want {
			t.Errorf("secret %s label = %q, want %q", name, got, want)
		}
	}
}
