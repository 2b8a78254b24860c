package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ctrlhost/ctrlhost/examples/widget-operator/controllerruntime/api/v1alpha1"
)

// SecretReconciler is the secret controller. Its queue holds the keys of the Widgets
// named by the widget label of changed Secrets, before and after the change; it hands
// each key on to the widget controller.
type SecretReconciler struct {
	// Widgets is the channel the widget controller watches.
	Widgets chan<- event.GenericEvent
}

// Reconcile requeues the Widget req names in the widget controller.
func (r *SecretReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	widget := &v1alpha1.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name},
	}
	select {
	case r.Widgets <- event.GenericEvent{Object: widget}:
		return ctrl.Result{}, nil
	case <-ctx.Done():
		return ctrl.Result{}, ctx.Err()
	}
}

// SetupWithManager registers the secret controller with mgr.
func (r *SecretReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("secret").
		Watches(&corev1.Secret{}, secretHandler()).
		Complete(r)
}

// secretHandler maps a Secret event to the Widget its label names. On updates it maps
// both the old and the new Secret, so relabelling a Secret requeues both Widgets.
func secretHandler() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(
		func(_ context.Context, secret client.Object) []reconcile.Request {
			name := secret.GetLabels()[widgetLabel]
			if name == "" {
				return nil
			}
			key := types.NamespacedName{Namespace: secret.GetNamespace(), Name: name}
			return []reconcile.Request{{NamespacedName: key}}
		})
}
