package endpointslicemirroring

//lint:file-ignore SA1019 Endpoints are deprecated, and what this controller mirrors (as KCM's)

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	esutil "k8s.io/endpointslice/util"
)

// Event reasons, KCM's, recorded on the Endpoints.
const (
	// reasonInvalidIPAddress: some addresses were not IPs and were skipped.
	reasonInvalidIPAddress = "InvalidIPAddress"
	// reasonTooManyAddressesToMirror: a subset had more addresses than
	// MaxEndpointsPerSubset; the rest were skipped.
	reasonTooManyAddressesToMirror = "TooManyAddressesToMirror"
)

var endpointsKind = schema.GroupVersionKind{Version: "v1", Kind: "Endpoints"}

// actions are the writes one reconcile makes.
type actions struct {
	create, update, remove []*discoveryv1.EndpointSlice
}

// reconcile writes the slices that mirror ep, given its existing mirrored
// slices, as KCM does: per group, the first existing slice is kept (and
// rewritten whole if its endpoints, labels, annotations or owner differ),
// the others deleted, or one is created; slices of groups no longer wanted
// are deleted, or, where a slice of the same address type is created,
// rewritten into it instead.
func (c *controller) reconcile(ctx context.Context, ep *corev1.Endpoints,
	existing []*discoveryv1.EndpointSlice) error {
	log := logr.FromContextOrDiscard(ctx)
	limit := int(c.maxPerSubset)
	d := mirror(ep, limit)
	if d.invalid > 0 {
		log.Info("Addresses of the Endpoints are not IPs: they are not mirrored",
			"skipped", d.invalid)
		c.recorder.Eventf(ep, corev1.EventTypeWarning, reasonInvalidIPAddress,
			"Skipped %d invalid IP addresses when mirroring to EndpointSlices", d.invalid)
	}
	if d.skipped > d.invalid {
		log.Info("Addresses of the Endpoints beyond the most mirrored per subset were skipped",
			"skipped", d.skipped, "max", limit)
		c.recorder.Eventf(ep, corev1.EventTypeWarning, reasonTooManyAddressesToMirror,
			"A max of %d addresses can be mirrored to EndpointSlices per Endpoints subset. "+
				"%d addresses were skipped", limit, d.skipped)
	}

	byKey := map[groupKey][]*discoveryv1.EndpointSlice{}
	for _, s := range existing {
		k := sliceKey(s)
		byKey[k] = append(byKey[k], s)
	}
	var acts actions
	for _, k := range slices.Sorted(maps.Keys(d.groups)) {
		c.reconcileGroup(ep, d.groups[k], oldestFirst(byKey[k]), &acts, limit)
	}
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		if _, ok := d.groups[k]; !ok {
			acts.remove = append(acts.remove, oldestFirst(byKey[k])...)
		}
	}
	recycle(&acts)
	return c.write(ctx, ep, acts)
}

// oldestFirst orders a group's existing slices: the first is the one kept.
// (KCM keeps the first its cache lists, which may be any.)
func oldestFirst(in []*discoveryv1.EndpointSlice) []*discoveryv1.EndpointSlice {
	out := slices.Clone(in)
	slices.SortFunc(out, func(a, b *discoveryv1.EndpointSlice) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

func (c *controller) reconcileGroup(ep *corev1.Endpoints, g *group,
	existing []*discoveryv1.EndpointSlice, acts *actions, limit int) {
	if g.set.Len() == 0 {
		acts.remove = append(acts.remove, existing...)
		return
	}
	var name string
	if len(existing) > 0 {
		acts.remove = append(acts.remove, existing[1:]...)
		first := existing[0]
		if mirrors(ep, g, first) {
			if !c.tracker.Has(first) {
				c.tracker.Update(first)
			}
			return
		}
		name = first.Name
	}
	s := newSlice(ep, g, name)
	eps := g.endpoints()
	s.Endpoints = eps[:min(len(eps), limit)]
	if name == "" {
		acts.create = append(acts.create, s)
	} else {
		acts.update = append(acts.update, s)
	}
}

// mirrors reports whether s already mirrors g of ep: the same endpoints
// (by the library's identity, and equal beyond it), ep's labels and
// annotations (but those a slice does not get), and no controlling
// Endpoints of ep's name with another UID.
func mirrors(ep *corev1.Endpoints, g *group, s *discoveryv1.EndpointSlice) bool {
	matched := 0
	for i := range s.Endpoints {
		e := s.Endpoints[i].DeepCopy() // the set sorts the addresses it hashes
		want := g.set.Get(e)
		if want == nil || !esutil.EndpointsEqualBeyondHash(want, e) {
			return false
		}
		matched++
	}
	if matched != g.set.Len() {
		return false
	}
	labels := withoutKeys(s.Labels, discoveryv1.LabelManagedBy, discoveryv1.LabelServiceName)
	annotations := withoutKeys(ep.Annotations, notMirrored...)
	if !apiequality.Semantic.DeepEqual(ep.Labels, labels) ||
		!apiequality.Semantic.DeepEqual(annotations, s.Annotations) {
		return false
	}
	for _, o := range s.OwnerReferences {
		if o.Kind == endpointsKind.Kind && o.Name == ep.Name && o.UID != ep.UID {
			return false
		}
	}
	return true
}

// recycle turns each create into an update of a slice that would be
// deleted, of the same address type.
func recycle(acts *actions) {
	var create []*discoveryv1.EndpointSlice
	for _, s := range acts.create {
		i := slices.IndexFunc(acts.remove, func(r *discoveryv1.EndpointSlice) bool {
			return r.AddressType == s.AddressType
		})
		if i < 0 {
			create = append(create, s)
			continue
		}
		s.Name = acts.remove[i].Name
		acts.update = append(acts.update, s)
		acts.remove = slices.Delete(acts.remove, i, i+1)
	}
	acts.create = create
}

// write makes the writes: creates (none while ep is being deleted; none,
// and no error, once its namespace is terminating), updates, deletions,
// keeping the tracker up to date; it stops at the first failure.
func (c *controller) write(ctx context.Context, ep *corev1.Endpoints, acts actions) error {
	api := c.client.DiscoveryV1().EndpointSlices(ep.Namespace)
	what := ep.Namespace + "/" + ep.Name
	if ep.DeletionTimestamp == nil {
		for _, s := range acts.create {
			created, err := api.Create(ctx, s, metav1.CreateOptions{})
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("creating an EndpointSlice for Endpoints %s: %w", what, err)
			}
			c.tracker.Update(created)
		}
	}
	for _, s := range acts.update {
		updated, err := api.Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("updating EndpointSlice %s for Endpoints %s: %w", s.Name, what, err)
		}
		c.tracker.Update(updated)
	}
	for _, s := range acts.remove {
		if err := api.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("deleting EndpointSlice %s of Endpoints %s: %w", s.Name, what, err)
		}
		c.tracker.ExpectDeletion(s)
	}
	return nil
}

// deleteMirrored deletes every slice mirrored for the Endpoints ns/name
// and forgets them; a slice already gone is not an error.
func (c *controller) deleteMirrored(ctx context.Context, ns, name string) error {
	c.tracker.DeleteService(ns, name)
	mirrored, err := c.mirroredSlices(ns, name)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range mirrored {
		err := c.client.DiscoveryV1().EndpointSlices(ns).Delete(ctx, s.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("deleting %d of the %d EndpointSlices mirrored for Endpoints %s/%s: %w",
			len(errs), len(mirrored), ns, name, errors.Join(errs...))
	}
	return nil
}
