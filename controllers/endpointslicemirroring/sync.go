package endpointslicemirroring

//lint:file-ignore SA1019 Endpoints are deprecated, and what this controller mirrors (as KCM's)

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/workloop"
)

// errStaleSlices is returned (and the Endpoints retried) while the
// informer has not yet delivered this controller's own last writes to the
// mirrored EndpointSlices.
var errStaleSlices = errors.New("EndpointSlice informer cache is out of date")

// sync mirrors one Endpoints, or deletes its mirrored slices when it is
// gone, is not to be mirrored, or its Service is gone or has a selector.
func (c *controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return workloop.Permanent(err)
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("endpoints", key)
	ep, err := c.endpoints.Endpoints(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		log.V(4).Info("Endpoints gone: deleting its mirrored EndpointSlices")
		return c.deleteMirrored(ctx, ns, name)
	case err != nil:
		return err
	case !shouldMirror(ep):
		log.V(4).Info("Endpoints not to be mirrored: deleting its mirrored EndpointSlices")
		return c.deleteMirrored(ctx, ns, name)
	}
	svc, err := c.services.Services(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		log.V(4).Info("Service gone: deleting the mirrored EndpointSlices")
		return c.deleteMirrored(ctx, ns, name)
	case err != nil:
		return err
	case svc.Spec.Selector != nil:
		log.V(4).Info("Service has a selector: deleting the mirrored EndpointSlices")
		return c.deleteMirrored(ctx, ns, name)
	}
	mirrored, err := c.mirroredSlices(ns, name)
	if err != nil {
		return err
	}
	if c.tracker.StaleSlices(svc, mirrored) {
		return fmt.Errorf("endpoints %s: %w", key, errStaleSlices)
	}
	return c.reconcile(logr.NewContext(ctx, log), ep, mirrored)
}

// mirroredSlices lists the slices this controller mirrored for the
// Endpoints ns/name.
func (c *controller) mirroredSlices(ns, name string) ([]*discoveryv1.EndpointSlice, error) {
	return c.slices.EndpointSlices(ns).List(labels.Set{
		discoveryv1.LabelServiceName: name,
		discoveryv1.LabelManagedBy:   ManagedBy,
	}.AsSelectorPreValidated())
}
