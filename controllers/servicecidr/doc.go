// Package servicecidr is kube-controller-manager's service-cidr
// controller, native: every ServiceCIDR carries the
// networking.k8s.io/service-cidr-finalizer finalizer and a Ready
// condition, and a deleted one stays, Ready=False, while Service
// addresses that only it could have allocated are allocated.
//
// Guarantees, as KCM v1.37 does it:
//   - names: service-cidr-controller, no alias; five workers; no flag (KCM
//     has none); its client is KCM's "service-cidrs-controller" (the
//     ServiceAccount under --use-service-account-credentials, whose RBAC
//     the API server bootstraps); events under "service-cidr-controller";
//   - it starts under the MultiCIDRServiceAllocator gate (GA and locked on
//     in 1.37), read through the host's gate: with the gate off the
//     InitFunc logs that and starts nothing, as KCM leaves the controller
//     out;
//   - a ServiceCIDR not being deleted gets the finalizer (a strategic merge
//     patch) when it lacks it, then Ready=True with the message "Kubernetes
//     Service CIDR is ready" and no reason; if that write fails, a Warning
//     event KubernetesServiceCIDRError is recorded and the sync retried;
//   - a ServiceCIDR being deleted may go when each of its ranges is held
//     by another ServiceCIDR's range (equal or larger, deleted or not), or
//     else when no IPAddress the API server's allocator made (label
//     ipaddress.kubernetes.io/managed-by=ipallocator.k8s.io, of the range's
//     family) is one only it could have allocated (an address is in a
//     range unless it is the range's network address or an IPv4 range's
//     broadcast address). While it may not, its Ready condition is False,
//     reason Terminating, with KCM's message; once it may, the finalizer
//     is removed (a strategic merge patch) 10s after its deletion, time for
//     the API servers' allocators to stop using it;
//   - the condition is written by server-side apply of status (field
//     manager "service-cidr-controller", forced), only when its status,
//     reason or message changes, with the time of the write as its
//     transition time; a ServiceCIDR gone under a patch is no error;
//   - a ServiceCIDR is queued when added (with every ServiceCIDR sharing an
//     address with it), updated or deleted; an allocator's IPAddress
//     queues, when added or deleted (a tombstone too), the ServiceCIDRs
//     that could have allocated it; a sync that fails 15 times in a row is
//     dropped until the next event, as in KCM.
//
// Differences from KCM: events go through the host's recorder; the work
// queue's metrics are labelled with the controller's name (KCM's queue is
// named "ipaddresses").
//
// Not sharded: ServiceCIDRs and IPAddresses are cluster-scoped, and
// whether a ServiceCIDR may go depends on every other one and on every
// allocated address.
//
// Non-guarantees: the caches decide, as in KCM: an address allocated just
// before the deletion reaches the controller's cache may be missed (the
// grace period is what narrows that window). The API server's own
// controller keeps the default ServiceCIDR ("kubernetes"); this one writes
// its Ready condition too, with its own message, as KCM does.
package servicecidr
