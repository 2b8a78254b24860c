// Package endpointslice is kube-controller-manager's EndpointSlice
// controller as a ctrlhost descriptor: canonical name
// endpointslice-controller, alias endpointslice, enabled by "*".
//
// For every Service with a selector (and not of type ExternalName) it keeps
// EndpointSlices, labelled kubernetes.io/service-name and
// endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io
// and owned by the Service, that list the Service's pods. The slices are
// computed by k8s.io/endpointslice's Reconciler, the library KCM itself
// uses, so their content matches KCM's: one set of slices per address type
// the Service serves, endpoints grouped by their resolved ports (named
// target ports are looked up in each pod), at most --max-endpoints-per-slice
// endpoints to a slice, ready/serving/terminating conditions, hostnames
// for pods whose subdomain names the Service, publishNotReadyAddresses,
// the endpoints.kubernetes.io/last-change-trigger-time annotation, the
// Service's labels copied (headless Services get
// service.kubernetes.io/headless), and topology hints for Services that ask
// for them (the topology cache is fed from the Nodes, as in KCM).
//
// Guarantees:
//   - Only slices managed by this controller are touched; Services without
//     a selector are left to whoever writes their slices.
//   - A sync never acts on a cache that has not yet delivered this
//     controller's own last writes (the library's slice tracker): it fails
//     and is retried with back-off instead. Slices being deleted are
//     ignored, so a finalizer on one cannot wedge its Service.
//   - Slices changed or deleted by someone else bring their Service back
//     in line after at least one second (or the batch period, if longer).
//   - Failed syncs are retried with KCM's back-off (1s doubling to 1000s,
//     10 retries a second overall) and dropped after 15 failures in a row;
//     FailedToUpdateEndpointSlices (and FailedToListPods /
//     FailedToListEndpointSlices) events are recorded on the Service.
//
// Non-guarantees and differences from KCM:
//   - The Services of a changed pod are found in a second work queue, as in
//     KCM; Node changes that re-read the topology go through the Service
//     queue under a key that names no Service, rather than KCM's third
//     queue (so they share its rate limiter).
//   - The library's metrics (endpoint_slice_controller_*) are not registered
//     with any registry: KCM registers them with the legacy global one.
package endpointslice
