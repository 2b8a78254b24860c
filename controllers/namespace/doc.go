// Package namespace is kube-controller-manager's namespace controller as a
// ctrlhost descriptor: canonical name namespace-controller, alias
// namespace, enabled by "*", flags --concurrent-namespace-syncs (10) and
// --namespace-sync-period (5m).
//
// When a namespace is deleted, the API server keeps it, in phase
// Terminating, until its spec.finalizers list is empty. This controller
// owns the "kubernetes" entry of that list: it deletes every object of
// every namespaced resource the server offers (found through discovery at
// every pass, so custom resources are included), and once nothing is left
// it removes its finalizer through the namespace's finalize subresource.
//
// A pass, as in KCM:
//   - the namespace is read from the API server (not the cache) and its
//     status.phase set to Terminating;
//   - pods are deleted first; while any remain nothing else is deleted;
//   - every other deletable resource is deleted with one deletecollection
//     call where discovery lists that verb, else listed and deleted one by
//     one (propagationPolicy Background), then listed again to see what is
//     left; a failure on one resource does not stop the others;
//   - the conditions NamespaceDeletionDiscoveryFailure,
//     NamespaceDeletionGroupVersionParsingFailure,
//     NamespaceDeletionContentFailure, NamespaceContentRemaining and
//     NamespaceFinalizersRemaining are set with KCM's reasons and messages
//     (status False with the "ok" reason when nothing is wrong);
//   - content still on its way out (pods within their grace period,
//     objects held by finalizers, estimated at 15s) requeues the namespace
//     after half the estimate plus a second; an error retries with
//     back-off (5ms doubling, at most a minute; all retries together at
//     most 10 a second after a burst of 100).
//
// Guarantees:
//   - The kubernetes finalizer is removed only after a pass found nothing
//     left and no error; objects with finalizers keep the namespace until
//     their finalizers are gone.
//   - A partial discovery failure (an aggregated API down) does not stop
//     the deletion of the resources that were discovered; it is reported in
//     NamespaceDeletionDiscoveryFailure and the namespace is retried, so it
//     is not finalized while some group could not be emptied.
//   - Namespaces are never modified from the informer's cache: each pass
//     reads the namespace from the API server. The phase update and the
//     finalize call retry on conflict on a fresh copy, and fail if the
//     namespace was replaced (its UID changed); a failed condition update
//     is logged and made again by the next pass (as in KCM).
//   - Every --namespace-sync-period each namespace being deleted is queued
//     again, also when the namespace informer was started before this
//     controller (a warm standby's takeover): the period is kept by the
//     controller's own ticker, not by an informer handler's resync period,
//     which client-go stretches to hours on an informer already running.
//
// Non-guarantees:
//   - Objects created in the namespace during the pass (by a client racing
//     the admission that refuses them) are found by the next pass only.
//   - Without a kubelet, scheduled pods being deleted gracefully stay until
//     their grace period ends and someone removes them.
//
// Discovery is ServerPreferredNamespacedResources, filtered with the
// shared apiresources.Filter (deletable: "delete"; by collection:
// "deletecollection"; listable: "list"), from one call per pass.
//
// Differences from KCM:
//   - The list and deletecollection verbs are read from each pass's
//     discovery answer; KCM reads them once at start-up and assumes both
//     for resources that appeared later. KCM also exits at start-up when
//     discovery returns nothing; here the first pass reports it instead.
//   - Resources other than pods are deleted in a fixed order (group,
//     version, resource); KCM's order is a map's.
//   - A requeue for remaining content resets the namespace's failure
//     back-off (KCM's keeps counting).
//   - The client's QPS and burst are raised 20 and 100 times as KCM does,
//     unless the host shares one rate limiter between the controller's
//     clients (sharding), which then decides. No metrics of its own.
package namespace
