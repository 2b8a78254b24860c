// Package deployment is kube-controller-manager's Deployment controller as
// a ctrlhost descriptor: canonical name deployment-controller, alias
// deployment, --concurrent-deployment-syncs (default 5), enabled by "*". It
// needs the ReplicaSet controller (controllers/replicaset) to make the
// pods.
//
// It keeps one ReplicaSet per pod template, named
// "<deployment>-<pod-template-hash>" with that hash (KCM's value, so names
// agree) in its labels, selector and pod template, and moves pods from the
// old ReplicaSets to the new one by the Deployment's strategy.
//
// Guarantees, as upstream (Kubernetes 1.37):
//   - ReplicaSets: the pod-template-hash is FNV-32a over the template (plus
//     status.collisionCount when set), encoded as KCM encodes it; a name
//     taken by a ReplicaSet that is not this Deployment's new one raises
//     collisionCount. Matching orphan ReplicaSets are adopted (after an
//     uncached re-read of the Deployment), owned ones that stop matching are
//     released; an adopted orphan with the Deployment's template becomes its
//     new ReplicaSet. Annotations: deployment.kubernetes.io/revision (the
//     new ReplicaSet's is one more than the highest old one; the Deployment
//     carries it too), revision-history (when an old template comes back),
//     desired-replicas and max-replicas (rewritten at every resize), and the
//     Deployment's own annotations except kubectl's last-applied
//     configuration, the controller's and the rollback request.
//   - RollingUpdate: the new ReplicaSet grows as far as maxSurge allows
//     (rounded up), old ones shrink as far as maxUnavailable allows
//     (rounded down; both zero means one), unavailable old pods first, oldest
//     ReplicaSet first; minReadySeconds is copied to the ReplicaSets, whose
//     availability counts. Recreate scales every old ReplicaSet to zero and
//     creates or grows the new one only once no old pod is running (it
//     watches pod deletions for that).
//   - A resize during a rollout, or of a paused Deployment, is spread over
//     the active ReplicaSets in proportion to their sizes (relative to the
//     max-replicas they were sized for), the rounding leftover going to the
//     largest. A paused Deployment is scaled but never rolled out.
//   - Status: replicas, updatedReplicas, readyReplicas, availableReplicas,
//     unavailableReplicas, terminatingReplicas (while the
//     DeploymentReplicaSetTerminatingReplicas gate is on, the 1.37
//     default), collisionCount, observedGeneration. Conditions: Available
//     (MinimumReplicasAvailable / MinimumReplicasUnavailable), Progressing
//     (NewReplicaSetCreated, FoundNewReplicaSet, ReplicaSetUpdated,
//     NewReplicaSetAvailable, ProgressDeadlineExceeded, ReplicaSetCreateError,
//     and Unknown DeploymentPaused / DeploymentResumed), ReplicaFailure copied
//     from the ReplicaSets. A rollout that stalls is requeued for a second
//     after its progress deadline.
//   - Once a rollout is complete (or while paused), old ReplicaSets beyond
//     revisionHistoryLimit are deleted, lowest revision first, skipping any
//     with pods, wanting pods, not yet observed by their controller, or being
//     deleted.
//   - Events, with KCM's reasons and wording: ScalingReplicaSet ("Scaled
//     up replica set web-5d4f9c7b8 from 0 to 3"), SelectingAll (an empty
//     selector: nothing else is done), ReplicaSetCreateError, and for the
//     deprecated deprecated.deployment.rollback.to annotation
//     DeploymentRollback, DeploymentRollbackRevisionNotFound,
//     DeploymentRollbackTemplateUnchanged.
//   - A Deployment being deleted only gets its status updated. Pods are
//     never created or deleted here; objects from caches are never modified.
//   - Sharded by namespace: under --enable-sharding each replica works the
//     Deployments of its slots, with caches of those slots only (KCM has no
//     sharding; without the flag it runs on the leader as in KCM).
//
// Non-guarantees and differences from KCM:
//   - A write in a sync carries the resourceVersion the previous write of
//     that sync returned, so a sync that writes the status twice does not
//     fail with a conflict and retry, as KCM's does; the end state is the
//     same.
//   - Every write (status, ReplicaSet create, update, adoption patch) is
//     recorded with the work loop's staleness guard: the Deployment is not
//     synced again until the informers have delivered those writes (or a
//     minute passed). KCM has no such guard for Deployments; it relies on
//     conflicts.
//   - Pods are found through an index of this package
//     (ctrlhost.deployment/pod-replicaset), not KCM's shared controller-UID
//     index. The workqueue is named after the controller
//     (deployment-controller), not "deployment"; events come from the host's
//     recorder with source deployment-controller, as KCM's. No
//     deployment-specific metrics.
//   - A key is dropped after 15 consecutive failures, as in KCM, but through
//     the work loop's retry limit; NamespaceTerminating errors are dropped
//     at once, as in KCM. A spec the API server would have refused (an
//     unparsable selector, maxSurge or maxUnavailable, an unknown strategy
//     type) is a permanent error, dropped until the Deployment changes,
//     where KCM retries it 15 times.
//   - ReplicaSets are claimed through ctrlhost's ownership package, which
//     also leaves alone (and reports) a ReplicaSet whose ownerReferences are
//     malformed; KCM does not check them (the API server refuses such
//     objects anyway).
package deployment
