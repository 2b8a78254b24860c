package endpointslice

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/workloop"
)

// errStaleSlices is returned (and the Service retried) while the informer
// has not yet delivered this controller's own last writes to the
// Service's EndpointSlices.
var errStaleSlices = errors.New("EndpointSlice informer cache is out of date")

// sync brings the EndpointSlices of one Service in line with its pods.
func (c *controller) sync(ctx context.Context, key string) error {
	log := logr.FromContextOrDiscard(ctx)
	if key == topologyKey {
		c.syncTopology(log)
		return nil
	}
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return workloop.Permanent(err)
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// The slices go with the Service (they are owned by it); only the
		// trackers forget it.
		c.triggers.DeleteService(ns, name)
		c.reconciler.DeleteService(ns, name)
		c.tracker.DeleteService(ns, name)
		return nil
	}
	if err != nil {
		return err
	}
	// ExternalName Services get no endpoints; Services without a selector
	// get theirs from someone else.
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.Selector == nil {
		return nil
	}
	pods, err := c.pods.Pods(ns).List(labels.Set(svc.Spec.Selector).AsSelectorPreValidated())
	if err != nil {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "FailedToListPods",
			"Error listing Pods for Service %s/%s: %v", ns, name, err)
		return err
	}
	mine := labels.Set{
		discoveryv1.LabelServiceName: svc.Name,
		discoveryv1.LabelManagedBy:   c.reconciler.GetControllerName(),
	}.AsSelectorPreValidated()
	listed, err := c.slices.EndpointSlices(ns).List(mine)
	if err != nil {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "FailedToListEndpointSlices",
			"Error listing Endpoint Slices for Service %s/%s: %v", ns, name, err)
		return err
	}
	// Slices being deleted are left alone, lest a finalizer on one block
	// the Service for good.
	slices := make([]*discoveryv1.EndpointSlice, 0, len(listed))
	for _, s := range listed {
		if s.DeletionTimestamp == nil {
			slices = append(slices, s)
		}
	}
	if c.tracker.StaleSlices(svc, slices) {
		return fmt.Errorf("service %s: %w", key, errStaleSlices)
	}
	// Computed even when nothing changes, so that the tracker's state moves
	// on.
	trigger := c.triggers.ComputeEndpointLastChangeTriggerTime(ns, svc, pods)
	if err := c.reconciler.Reconcile(log, svc, pods, slices, trigger); err != nil {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "FailedToUpdateEndpointSlices",
			"Error updating Endpoint Slices for Service %s/%s: %v", ns, name, err)
		return err
	}
	return nil
}

// syncTopology feeds the Nodes to the topology cache and syncs the
// Services whose hints the new node distribution overloads.
func (c *controller) syncTopology(log logr.Logger) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		log.Error(err, "Listing Nodes")
		return
	}
	c.topology.SetNodes(log, nodes)
	for _, key := range c.topology.GetOverloadedServices() {
		log.V(2).Info("Syncing Service whose topology hints a Node change overloaded", "key", key)
		c.after(key, 0)
	}
}
