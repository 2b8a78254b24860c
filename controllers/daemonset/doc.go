// Package daemonset is kube-controller-manager's DaemonSet controller as a
// ctrlhost descriptor: canonical name daemonset-controller, alias
// daemonset, enabled by "*", --concurrent-daemonset-syncs workers
// (default 2). It imports nothing from k8s.io/kubernetes.
//
// It runs one pod of each DaemonSet on every node that should run one:
// the template's nodeName (if set), nodeSelector and required node
// affinity must match the node, and its NoSchedule and NoExecute taints
// must be tolerated by the template's tolerations plus those every daemon
// pod gets (node.kubernetes.io/not-ready and unreachable with NoExecute;
// disk-pressure, memory-pressure, pid-pressure and unschedulable with
// NoSchedule; network-unavailable with NoSchedule for hostNetwork pods).
// A pod already on a node stays while only NoSchedule taints are
// untolerated. Each pod is pinned to its node as KCM pins it: the
// template's required node affinity terms are replaced by one term,
// matchFields metadata.name In [node], for the scheduler to honour.
// Creates go in slow-start batches of at most 250, guarded by
// expectations; failed and succeeded pods are deleted (failed ones with a
// per-node exponential back-off from 1s to 15m and a FailedDaemonPod
// event), as are pods on nodes that should not keep them, all but the
// oldest pod on a node, and unbound pods whose node no longer exists.
//
// History is kept as ControllerRevisions named <ds>-<hash> with KCM's
// hash of the template (and status.collisionCount), so names are KCM's;
// pods carry the controller-revision-hash and pod-template-generation
// labels. RollingUpdate honours maxUnavailable and maxSurge; OnDelete
// replaces nothing. Status carries desired, current, misscheduled, ready,
// available, unavailable and updated counts and observedGeneration;
// minReadySeconds is honoured. Pods and revisions are adopted and
// released through ControllerRefs.
//
// Guarantees:
//   - Objects from the informer caches are never modified.
//   - With StaleControllerConsistencyDaemonSet on (the 1.37 default), a
//     DaemonSet whose pod creations or status writes have not yet reached
//     the informers is not synced until they have (at most a minute).
//   - Run returns only after its workers and the back-off collector ended.
//
// Non-guarantees:
//   - Ordering between DaemonSets, and which old pods a rolling update
//     replaces first (KCM picks them in map order too).
//   - No metrics (KCM has none for this controller beyond the stale-sync
//     skip counter, which the kit's workloop_stale_syncs_skipped_total
//     replaces).
//
// Differences from KCM:
//   - Node updates are matched against the DaemonSets in the informer
//     handler instead of through a second work queue of node names; the
//     DaemonSets enqueued are the same.
//   - Pods of the informer's initial list do not each enqueue their
//     DaemonSet (every DaemonSet is enqueued by its own initial list).
//   - Node affinity and taint matching are this package's own (the rules
//     of k8s.io/component-helpers' nodeaffinity and taint helpers), so the
//     root module needs no new dependency.
//   - Expectations are kept under two keys per DaemonSet (creations and
//     deletions), deletions tracked by pod name rather than counted.
//   - The client is asked for as "daemon-set-controller", as KCM does; the
//     event source is the controller's canonical name.
package daemonset
