// Package statefulset is kube-controller-manager's StatefulSet controller
// as a ctrlhost descriptor: canonical name statefulset-controller, alias
// statefulset, enabled by "*", --concurrent-statefulset-syncs workers
// (default 5), client and event source "statefulset-controller". It
// imports nothing from k8s.io/kubernetes; its revision history and hash
// are its own code.
//
// It keeps spec.replicas pods named <set>-<ordinal>, ordinals from
// spec.ordinals.start (0 when unset), each with hostname <pod>, subdomain
// spec.serviceName, and the labels statefulset.kubernetes.io/pod-name,
// apps.kubernetes.io/pod-index and controller-revision-hash. Each claim
// template gives each pod a PersistentVolumeClaim <claim>-<set>-<ordinal>
// (labelled with the template's labels and the selector's matchLabels),
// created before the pod and again while the pod is pending, and mounted
// as the template's volume. OrderedReady creates pods one at a time in
// ordinal order, each once every lower one is running, ready and
// available (minReadySeconds), and deletes out-of-range pods from the
// highest ordinal down, one at a time, waiting for terminations; Parallel
// does both in slow-start batches (1, 2, 4, … at most 500). Failed and
// succeeded pods are deleted and made again. A pod whose identity or
// storage drifted is repaired with an update.
//
// Revisions are ControllerRevisions named <set>-<hash>, holding a
// strategic-merge patch that replaces spec.template, encoded and hashed
// (FNV-1 over the patch and status.collisionCount) byte for byte as KCM
// does, so names agree with KCM's and a controller switch rolls nothing.
// A template equal to an older revision reuses it under the next number
// (a rollback); a name taken by other data raises collisionCount.
// Revisions beyond spec.revisionHistoryLimit that neither the status nor
// any pod uses are deleted, oldest first. RollingUpdate replaces outdated
// pods from the highest ordinal down to rollingUpdate.partition; with
// MaxUnavailableStatefulSet (beta, on in 1.37) up to maxUnavailable pods
// at once (Parallel: outdated unavailable pods first, then available ones
// within the budget), without it one at a time, each once the one above
// is available. OnDelete replaces only what is deleted. Recreate, under
// the alpha StatefulSetRecreateStrategy gate (off in 1.37; without it an
// UnknownStrategy warning and a retried error, as KCM), deletes every
// outdated pod, waits until all are gone, then makes the new ones, with
// the Progressing condition (RecreateInProgress, then RecreateCompleted).
// Status carries replicas, readyReplicas, availableReplicas,
// currentReplicas, updatedReplicas, currentRevision, updateRevision,
// collisionCount, observedGeneration and conditions; currentRevision
// becomes updateRevision once every replica is updated and ready. A set
// with minReadySeconds is requeued when its next pod becomes available.
//
// persistentVolumeClaimRetentionPolicy is kept through owner references,
// as KCM keeps it: Retain/Retain none; whenDeleted Delete a controller
// reference to the set; whenScaled Delete a controller reference to the
// pod once its ordinal is out of range (the garbage collector deletes the
// claim with the pod, and a pod is not made again while its claim still
// references a former pod of its name). Claims referencing a former set
// or pod of the same name, or controlled by something else, are left
// alone (the latter with a ConflictingController event).
//
// Events are KCM's, on the set: SuccessfulCreate/FailedCreate ("create
// Pod …", "create Claim …"), SuccessfulUpdate/FailedUpdate,
// SuccessfulDelete/FailedDelete, ConflictingController, UnknownStrategy.
//
// Guarantees:
//   - Objects from the informer caches are never modified; pods and
//     claims are cached pruned (docs/cache.md), so a pod is read from the
//     API server before it is updated, and a claim's owner references are
//     written with a merge patch guarded by its resourceVersion.
//   - With StaleControllerConsistencyStatefulSet on (the 1.37 default), a
//     set whose pod or claim writes or status update have not reached the
//     informers is not synced until they have (at most the kit's
//     StaleTimeout).
//   - Run returns only after its workers ended.
//
// Non-guarantees:
//   - Ordering between StatefulSets.
//   - KCM's statefulset metrics (max and current unavailable replicas per
//     set, stale-sync skips) are not exported; the kit's
//     workloop_stale_syncs_skipped_total counts the skips.
//   - Not sharded: a set's pods, claims and revisions are read across the
//     namespace (orphan adoption, claims by name), and sets are few.
//
// Differences from KCM:
//   - StatefulSetSemanticRevisionComparison re-encodes the newest revision
//     without applying the API's defaults first (KCM defaults it through
//     its scheme): a revision written by an older encoder that lacks a
//     field the API has since defaulted is replaced by a new one rather
//     than kept.
//   - Pod updates read the pod from the API server first (one GET more
//     per repaired pod); claim owners are patched, not updated.
//   - Volumes of a new pod follow the claim templates' order (KCM's come
//     in map order, random).
//   - The status is not rewritten when only the form of empty conditions
//     differs (nil against []).
package statefulset
