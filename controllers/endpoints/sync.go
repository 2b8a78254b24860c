package endpoints

//lint:file-ignore SA1019 Endpoints are deprecated, and what this controller maintains (as KCM's)

import (
	"context"
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	endpointslicerec "k8s.io/endpointslice"
	esutil "k8s.io/endpointslice/util"
	utilnet "k8s.io/utils/net"

	epsubsets "github.com/ctrlhost/ctrlhost/controllers/internal/subsets"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// overCapacityValue is the over-capacity annotation's value.
const overCapacityValue = "truncated"

// sync writes the Endpoints object of one Service, or deletes it when the
// Service is gone.
func (c *controller) sync(ctx context.Context, key string) error {
	log := logr.FromContextOrDiscard(ctx)
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return workloop.Permanent(err)
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// Endpoints of a Service that is gone go too, whoever wrote them.
		err := c.client.CoreV1().Endpoints(ns).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		c.triggers.DeleteService(ns, name)
		c.stale.forget(ns, name)
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
		return err
	}
	// Computed even when nothing changes, so that the tracker's state moves
	// on.
	trigger := c.triggers.ComputeEndpointLastChangeTriggerTime(ns, svc, pods)
	subsets, ready, notReady := desiredSubsets(log, svc, pods)

	current, err := c.endpoints.Endpoints(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		current = &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: svc.Labels}}
	case err != nil:
		return err
	case c.stale.stale(current):
		return fmt.Errorf(
			"endpoints informer cache is out of date, resource version %s already "+
				"processed for endpoints %s",
			current.ResourceVersion,
			key,
		)
	}
	create := current.ResourceVersion == ""
	if !create &&
		(subsetsEqual(current.Subsets, subsets) ||
			subsetsEqual(epsubsets.Repack(current.Subsets), subsets)) &&
		labelsCorrect(current.Labels, svc.Labels) &&
		capacityAnnotationCorrect(current.Annotations, current.Subsets) {
		return nil
	}

	want := current.DeepCopy()
	want.Subsets = subsets
	if want.Annotations == nil {
		want.Annotations = map[string]string{}
	}
	if trigger.IsZero() {
		delete(want.Annotations, corev1.EndpointsLastChangeTriggerTime)
	} else {
		want.Annotations[corev1.EndpointsLastChangeTriggerTime] = trigger.UTC().Format(time.RFC3339Nano)
	}
	if truncate(want) {
		want.Annotations[corev1.EndpointsOverCapacity] = overCapacityValue
	} else {
		delete(want.Annotations, corev1.EndpointsOverCapacity)
	}
	want.Labels = maps.Clone(svc.Labels)
	if want.Labels == nil {
		want.Labels = map[string]string{}
	}
	if isServiceIPSet(svc) {
		delete(want.Labels, corev1.IsHeadlessService)
	} else {
		want.Labels[corev1.IsHeadlessService] = ""
	}
	want.Labels[managedByLabel] = managedBy

	log.V(4).
		Info("Updating Endpoints", "service", key, "readyEndpoints", ready, "notReadyEndpoints", notReady)
	var updated *corev1.Endpoints
	if create {
		_, err = c.client.CoreV1().Endpoints(ns).Create(ctx, want, metav1.CreateOptions{})
	} else {
		updated, err = c.client.CoreV1().Endpoints(ns).Update(ctx, want, metav1.UpdateOptions{})
	}
	if err != nil {
		if create && apierrors.IsForbidden(err) &&
			apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			// The namespace is going away; so will the Service.
			return nil
		}
		if create {
			c.recorder.Eventf(want, corev1.EventTypeWarning, "FailedToCreateEndpoint",
				"Failed to create endpoint for service %v/%v: %v", ns, name, err)
		} else {
			c.recorder.Eventf(want, corev1.EventTypeWarning, "FailedToUpdateEndpoint",
				"Failed to update endpoint %v/%v: %v", ns, name, err)
		}
		return err
	}
	if updated != nil && updated.ResourceVersion != current.ResourceVersion {
		c.stale.replacedVersion(current)
	}
	return nil
}

// desiredSubsets returns the packed subsets svc's pods give, with how many
// ready and not-ready addresses went in (one per pod and port).
func desiredSubsets(
	log logr.Logger,
	svc *corev1.Service,
	pods []*corev1.Pod,
) (subsets []corev1.EndpointSubset, ready, notReady int) {
	subsets = []corev1.EndpointSubset{}
	tolerateUnready := svc.Spec.PublishNotReadyAddresses
	add := func(pod *corev1.Pod, addr corev1.EndpointAddress, port *corev1.EndpointPort) {
		ports := []corev1.EndpointPort{}
		if port != nil {
			ports = append(ports, *port)
		}
		if tolerateUnready || esutil.IsPodReady(pod) {
			subsets = append(
				subsets,
				corev1.EndpointSubset{Addresses: []corev1.EndpointAddress{addr}, Ports: ports},
			)
			ready++
		} else {
			subsets = append(subsets,
				corev1.EndpointSubset{NotReadyAddresses: []corev1.EndpointAddress{addr}, Ports: ports})
			notReady++
		}
	}
	for _, pod := range pods {
		if !esutil.ShouldPodBeInEndpoints(pod, tolerateUnready) {
			continue
		}
		addr, err := podAddress(svc, pod)
		if err != nil {
			log.V(2).
				Info("Pod has no address of the Service's IP family", "service", svc.Namespace+"/"+svc.Name,
					"pod", pod.Name, "err", err)
			continue
		}
		if esutil.ShouldSetHostname(pod, svc) {
			addr.Hostname = pod.Spec.Hostname
		}
		if len(svc.Spec.Ports) == 0 {
			// Only headless Services may have no ports: their addresses
			// are listed without ports.
			if svc.Spec.ClusterIP == corev1.ClusterIPNone {
				add(pod, addr, nil)
			}
			continue
		}
		for i := range svc.Spec.Ports {
			sp := &svc.Spec.Ports[i]
			num, err := endpointslicerec.FindPort(pod, sp)
			if err != nil {
				log.V(4).
					Info("Pod lacks the Service's port", "service", svc.Namespace+"/"+svc.Name, "pod", pod.Name,
						"err", err)
				continue
			}
			add(
				pod,
				addr,
				&corev1.EndpointPort{
					Name:        sp.Name,
					Port:        int32(num),
					Protocol:    sp.Protocol,
					AppProtocol: sp.AppProtocol,
				},
			)
		}
	}
	return epsubsets.Repack(subsets), ready, notReady
}

// podAddress is pod's address of the Service's (first) IP family: from
// spec.ipFamilies, else the cluster IP's family, else the pod IP's.
func podAddress(svc *corev1.Service, pod *corev1.Pod) (corev1.EndpointAddress, error) {
	family := corev1.IPv4Protocol
	switch {
	case len(svc.Spec.IPFamilies) > 0:
		family = svc.Spec.IPFamilies[0]
	case svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone:
		if utilnet.IsIPv6String(svc.Spec.ClusterIP) {
			family = corev1.IPv6Protocol
		}
	case utilnet.IsIPv6String(pod.Status.PodIP):
		family = corev1.IPv6Protocol
	}
	wantV6 := family == corev1.IPv6Protocol
	for _, pip := range pod.Status.PodIPs {
		ip := utilnet.ParseIPSloppy(pip.IP)
		if ip != nil && utilnet.IsIPv6(ip) == wantV6 {
			return corev1.EndpointAddress{
				IP:       ip.String(),
				NodeName: &pod.Spec.NodeName,
				TargetRef: &corev1.ObjectReference{
					Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
				},
			}, nil
		}
	}
	return corev1.EndpointAddress{}, fmt.Errorf(
		"failed to find a matching endpoint for service %v",
		svc.Name,
	)
}

// subsetsEqual compares subsets semantically, ignoring the resource
// versions of target references.
func subsetsEqual(a, b []corev1.EndpointSubset) bool {
	return equality.Semantic.DeepEqual(withoutRefVersions(a), withoutRefVersions(b))
}

func withoutRefVersions(subsets []corev1.EndpointSubset) []corev1.EndpointSubset {
	unversioned := func(addrs []corev1.EndpointAddress) []corev1.EndpointAddress {
		if addrs == nil {
			return nil
		}
		out := make([]corev1.EndpointAddress, len(addrs))
		for i, a := range addrs {
			if a.TargetRef != nil && a.TargetRef.ResourceVersion != "" {
				ref := *a.TargetRef
				ref.ResourceVersion = ""
				a.TargetRef = &ref
			}
			out[i] = a
		}
		return out
	}
	if subsets == nil {
		return nil
	}
	out := make([]corev1.EndpointSubset, len(subsets))
	for i, s := range subsets {
		s.Addresses = unversioned(s.Addresses)
		s.NotReadyAddresses = unversioned(s.NotReadyAddresses)
		out[i] = s
	}
	return out
}

// labelsCorrect reports whether the Endpoints' labels are the Service's plus
// the managed-by label (and possibly the headless one).
func labelsCorrect(epLabels, svcLabels map[string]string) bool {
	if epLabels[managedByLabel] != managedBy {
		return false
	}
	ours := 0
	for k, v := range epLabels {
		if k == corev1.IsHeadlessService || k == managedByLabel {
			ours++
			continue
		}
		if sv, ok := svcLabels[k]; !ok || sv != v {
			return false
		}
	}
	return len(svcLabels) == len(epLabels)-ours
}

// capacityAnnotationCorrect reports whether subsets fit and the
// over-capacity annotation is absent.
func capacityAnnotationCorrect(
	annotations map[string]string,
	subsets []corev1.EndpointSubset,
) bool {
	n := 0
	for _, s := range subsets {
		n += len(s.Addresses) + len(s.NotReadyAddresses)
	}
	if n > maxCapacity {
		return false
	}
	_, ok := annotations[corev1.EndpointsOverCapacity]
	return !ok
}

// truncate cuts ep down to maxCapacity addresses, reporting whether it had
// to. Not-ready addresses go first; if the ready ones alone are too many,
// every not-ready one goes and the ready ones are cut. Each subset keeps a
// share proportional to its size (rounded up, within what is left).
func truncate(ep *corev1.Endpoints) bool {
	ready, notReady := 0, 0
	for _, s := range ep.Subsets {
		ready += len(s.Addresses)
		notReady += len(s.NotReadyAddresses)
	}
	if ready+notReady <= maxCapacity {
		return false
	}
	cutReady := ready > maxCapacity
	room, total := maxCapacity-ready, notReady
	if cutReady {
		room, total = maxCapacity, ready
	}
	left := room
	for i := range ep.Subsets {
		s := ep.Subsets[i]
		n := len(s.NotReadyAddresses)
		if cutReady {
			n = len(s.Addresses)
		}
		keep := min(int(math.Ceil(float64(n)/float64(total)*float64(room))), left)
		if cutReady {
			s.Addresses = firstN(s.Addresses, keep)
			s.NotReadyAddresses = []corev1.EndpointAddress{}
			left -= len(s.Addresses)
		} else {
			s.NotReadyAddresses = firstN(s.NotReadyAddresses, keep)
			left -= len(s.NotReadyAddresses)
		}
		ep.Subsets[i] = s
	}
	return true
}

func firstN(addrs []corev1.EndpointAddress, n int) []corev1.EndpointAddress {
	if len(addrs) <= n {
		return addrs
	}
	return addrs[:n]
}
