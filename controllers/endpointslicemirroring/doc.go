// Package endpointslicemirroring is kube-controller-manager's
// EndpointSlice mirroring controller, native: the Endpoints of a Service
// without a selector (written by hand or by another controller) are
// mirrored into EndpointSlices, so that consumers of EndpointSlices (kube-
// proxy, DNS) see them.
//
// Guarantees, as KCM v1.37 does it:
//   - names: endpointslice-mirroring-controller, alias
//     endpointslicemirroring, enabled by "*"; events from
//     endpoint-slice-mirroring-controller; its client is KCM's
//     "endpointslicemirroring-controller" (the ServiceAccount under
//     --use-service-account-credentials, whose RBAC the API server
//     bootstraps); KCM's flags --mirroring-concurrent-service-endpoint-syncs
//     (5 workers, 1 to 50), --mirroring-max-endpoints-per-subset (1000, 1
//     to 1000) and --mirroring-endpointslice-updates-batch-period (0); no
//     feature gate.
//   - An Endpoints is mirrored when a Service of its name exists with a nil
//     selector (ExternalName ones included, as in KCM), it does not carry
//     endpointslice.kubernetes.io/skip-mirror=true (which the
//     Endpoints controller puts on the Endpoints it writes) and it is not
//     a leader-election record (control-plane.alpha.kubernetes.io/leader
//     annotation). Otherwise, and once the Endpoints or the Service is
//     gone, every slice mirrored for it is deleted.
//   - Mirrored slices are labelled kubernetes.io/service-name=<name> and
//     endpointslice.kubernetes.io/managed-by=
//     endpointslicemirroring-controller.k8s.io over a copy of the Endpoints'
//     labels, carry its annotations but
//     endpoints.kubernetes.io/last-change-trigger-time and kubectl's
//     last-applied-configuration, are controlled by the Endpoints (an
//     owner reference, v1 Endpoints, with blockOwnerDeletion: the garbage
//     collector deletes them with it) and are named from "<name>-".
//   - Content: the subsets are first put in KCM's canonical form (an
//     address, told apart by IP and target UID, not ready on a port if any
//     subset says so; ports carrying the same addresses grouped); each
//     subset gives one slice per address type (IPv4, IPv6) that it has
//     addresses of, with its ports (in KCM's order) and, per address, an
//     endpoint with the canonical IP, the Ready condition (no serving or
//     terminating), the hostname, node name and target reference.
//     Addresses that are not IPs are skipped (an InvalidIPAddress warning
//     on the Endpoints). At most --mirroring-max-endpoints-per-subset
//     addresses of a subset are mirrored, ready ones first, each list in
//     IP order; the rest are skipped with a TooManyAddressesToMirror
//     warning. (An Endpoints the Endpoints controller truncated carries its
//     endpoints.kubernetes.io/over-capacity annotation, which is mirrored
//     as any other.)
//   - Writes, as KCM's: per slice group the first existing slice is kept,
//     and replaced whole (an Update with no resourceVersion: labels,
//     annotations, owner references, finalizers as the mirror has them) when
//     its endpoints, labels, annotations or controlling Endpoints' UID
//     differ; extra slices of a group, and slices of groups no longer
//     wanted, are deleted, or rewritten into a group that needs a new slice
//     of the same address type instead of creating one. Nothing is created
//     for an Endpoints being deleted, nor in a terminating namespace (the
//     Endpoints is dropped without error). Only slices managed by this
//     controller are touched.
//   - A sync never acts on a cache that has not delivered this
//     controller's own last writes (the k8s.io/endpointslice tracker): it
//     fails and is retried. Slices changed, taken over or deleted by
//     someone else bring their Endpoints back in line after the batch
//     period. Failed syncs are retried with KCM's back-off (1s doubling to
//     100s, 10 retries a second overall) and dropped after 15 failures in
//     a row.
//
// Differences from KCM:
//   - Within a slice, endpoints are written in the canonical order (ready
//     then not ready, each by IP); KCM writes them in map order, which
//     differs from write to write (so either order is one of KCM's).
//     Where a group has several slices KCM keeps the first its cache
//     lists; this keeps the oldest (then by name).
//   - KCM's recycling of a slice to delete into a slice to create picks
//     the create to drop by name (all are nameless), so for dual-stack
//     Endpoints whose ports change it may try to create a slice that
//     exists, fail, and succeed only on a retry; this pairs them by
//     address type and converges in one sync, at the state KCM reaches.
//   - A mirrored slice already gone when it is deleted is not an error
//     (KCM retries the Endpoints once).
//   - A negative --mirroring-endpointslice-updates-batch-period is an
//     error (KCM takes it as no delay).
//   - KCM's endpoint_slice_mirroring_controller_* metrics are not
//     exported; the kit's workloop metrics are.
//   - Of a Service only spec.selector is read: the host may cache no more
//     of it for this controller (docs/cache.md).
//
// Not sharded: the EndpointSlice informer is not filtered to a slot, and a
// sync deletes the mirrored slices of an Endpoints its cache does not hold,
// so a slot would delete the slices of others'; as with the EndpointSlice
// controller, one process mirrors the cluster.
//
// Non-guarantees: mirroring follows the Endpoints, not the pods behind
// them (no readiness of its own, no topology hints, no zone). A Service
// whose selector is an empty map (which the API server never stores)
// counts as having one, as in KCM. An Endpoints whose own labels include
// the service-name or managed-by label is rewritten on each of its changes
// (the comparison leaves those labels out of the slice only), as in KCM.
package endpointslicemirroring
