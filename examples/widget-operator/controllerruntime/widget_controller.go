package main

import (
	"context"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/ctrlhost/ctrlhost/examples/widget-operator/controllerruntime/api/v1alpha1"
)

const (
	// widgetLabel on a Secret names the Widget whose ConfigMap lists the Secret's keys.
	widgetLabel = "example.ctrlhost.io/widget"
	// widgetFinalizer keeps a Widget until its Secrets have been released.
	widgetFinalizer = "example.ctrlhost.io/release"
	// secretKeysKey is the ConfigMap key holding the Secrets' keys, comma-separated.
	secretKeysKey = "secret-keys"
	// conditionReady is the type of the Widget's only condition.
	conditionReady = "Ready"
)

// WidgetReconciler writes each Widget's ConfigMap and status.
type WidgetReconciler struct {
	client.Client
	Scheme *runtime.Scheme

	// Requeue carries Widgets that the secret controller wants reconciled.
	Requeue <-chan event.GenericEvent
}

// Reconcile brings the ConfigMap and status of one Widget up to date, or releases
// the Widget's Secrets when it is being deleted.
func (r *WidgetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)

	var widget v1alpha1.Widget
	if err := r.Get(ctx, req.NamespacedName, &widget); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	if !widget.DeletionTimestamp.IsZero() {
		if !controllerutil.ContainsFinalizer(&widget, widgetFinalizer) {
			return ctrl.Result{}, nil
		}
		if err := r.releaseSecrets(ctx, &widget); err != nil {
			return ctrl.Result{}, err
		}
		controllerutil.RemoveFinalizer(&widget, widgetFinalizer)
		if err := r.Update(ctx, &widget); err != nil {
			return ctrl.Result{}, err
		}
		log.Info("Released secrets")
		return ctrl.Result{}, nil
	}

	if controllerutil.AddFinalizer(&widget, widgetFinalizer) {
		if err := r.Update(ctx, &widget); err != nil {
			return ctrl.Result{}, err
		}
	}

	var secrets corev1.SecretList
	if err := r.List(ctx, &secrets, client.InNamespace(widget.Namespace),
		client.MatchingLabels{widgetLabel: widget.Name}); err != nil {
		return ctrl.Result{}, err
	}
	keys := secretKeys(secrets.Items)

	before := widget.DeepCopy()
	configMap := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: widget.Name, Namespace: widget.Namespace},
	}
	op, cmErr := controllerutil.CreateOrUpdate(ctx, r.Client, configMap, func() error {
		configMap.Data = maps.Clone(widget.Spec.Data)
		if configMap.Data == nil {
			configMap.Data = map[string]string{}
		}
		configMap.Data[secretKeysKey] = strings.Join(keys, ",")
		return controllerutil.SetControllerReference(&widget, configMap, r.Scheme)
	})
	if cmErr != nil {
		meta.SetStatusCondition(&widget.Status.Conditions, metav1.Condition{
			Type:               conditionReady,
			Status:             metav1.ConditionFalse,
			Reason:             "ConfigMapFailed",
			Message:            cmErr.Error(),
			ObservedGeneration: widget.Generation,
		})
	} else {
		if op != controllerutil.OperationResultNone {
			log.Info("Wrote ConfigMap", "operation", op)
		}
		widget.Status.ConfigMap = configMap.Name
		widget.Status.SecretKeys = len(keys)
		meta.SetStatusCondition(&widget.Status.Conditions, metav1.Condition{
			Type:               conditionReady,
			Status:             metav1.ConditionTrue,
			Reason:             "Reconciled",
			Message:            "ConfigMap is up to date",
			ObservedGeneration: widget.Generation,
		})
	}

	if !equality.Semantic.DeepEqual(before.Status, widget.Status) {
		if err := r.Status().Update(ctx, &widget); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, cmErr
}

// releaseSecrets removes the widget label from the Secrets labelled for widget.
func (r *WidgetReconciler) releaseSecrets(ctx context.Context, widget *v1alpha1.Widget) error {
	var secrets corev1.SecretList
	if err := r.List(ctx, &secrets, client.InNamespace(widget.Namespace),
		client.MatchingLabels{widgetLabel: widget.Name}); err != nil {
		return err
	}
	for i := range secrets.Items {
		secret := &secrets.Items[i]
		patch := client.MergeFrom(secret.DeepCopy())
		delete(secret.Labels, widgetLabel)
		if err := r.Patch(ctx, secret, patch); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// secretKeys returns the sorted union of the data keys of secrets.
func secretKeys(secrets []corev1.Secret) []string {
	var keys []string
	for _, secret := range secrets {
		for key := range secret.Data {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// SetupWithManager registers the widget controller with mgr.
func (r *WidgetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Widget{}).
		Owns(&corev1.ConfigMap{}).
		WatchesRawSource(source.Channel(r.Requeue, &handler.EnqueueRequestForObject{})).
		Complete(r)
}
