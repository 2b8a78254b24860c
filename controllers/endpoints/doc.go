// Package endpoints is kube-controller-manager's Endpoints controller as a
// ctrlhost descriptor: canonical name endpoints-controller, alias endpoint,
// enabled by "*". Its API client is named endpoint-controller, as KCM's.
//
// For every Service with a selector (and not of type ExternalName) it
// writes an Endpoints object of the same name: the Service's labels plus
// endpoints.kubernetes.io/managed-by=endpoint-controller (and
// service.kubernetes.io/headless for Services without a cluster IP), and
// subsets listing the pods that match the selector. A pod is listed when it
// is not terminal, has a pod IP of the Service's IP family and is not
// terminating (terminating pods are listed too when
// publishNotReadyAddresses is set); ready pods (or every listed pod, with
// publishNotReadyAddresses) as addresses, the others as notReadyAddresses,
// once per Service port the pod has (named target ports resolved in each
// pod); a headless Service without ports lists addresses without ports.
// Subsets are packed and ordered exactly as KCM packs them. The
// endpoints.kubernetes.io/last-change-trigger-time annotation carries the
// time of the change that triggered the update (computed by
// k8s.io/endpointslice's tracker, as in KCM). Past 1000 addresses the
// object is truncated (not-ready addresses first, every subset keeping a
// proportional share) and annotated endpoints.kubernetes.io/over-capacity:
// truncated. When the Service goes, its Endpoints object is deleted; at
// start every Endpoints object (but leader-election locks) is checked, so
// that those left behind by a Service deleted while no controller ran go
// too.
//
// Guarantees:
//   - Endpoints of Services without a selector, and of ExternalName
//     Services, are never written (a Service that does not exist at all has
//     its Endpoints deleted, as in KCM).
//   - An unchanged Service is not rewritten: the object is updated only when
//     its subsets (compared as written or after repacking, ignoring target
//     resource versions), labels or capacity annotation are wrong.
//   - A sync never acts on an Endpoints object this controller has already
//     replaced (the informer is behind): it fails and is retried.
//   - The Services of a changed pod are found in a second work queue whose
//     workers start once the caches synced, as in KCM (so a Service is
//     synced again after the first pass, which matters to over-capacity
//     Endpoints: their annotations are rewritten at every sync).
//   - Failed syncs are retried with back-off and dropped after 15 failures
//     in a row; FailedToCreateEndpoint / FailedToUpdateEndpoint events are
//     recorded. A create refused because the namespace is terminating is
//     not an error.
//
// Non-guarantees and differences from KCM:
//   - A zero ConcurrentEndpointSyncs takes the default, as KCM's
//     configuration defaulting does.
package endpoints
