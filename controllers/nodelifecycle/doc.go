// Package nodelifecycle is kube-controller-manager's
// node-lifecycle-controller, native: it judges each node's health from its
// status and its Lease in kube-node-lease, marks silent nodes Unknown,
// taints nodes by their conditions, queues NoExecute taints through
// rate-limited per-zone queues, and marks the pods of nodes that stop
// being Ready not ready. Evicting pods for NoExecute taints is the
// separate taint-eviction-controller's (package tainteviction), as in KCM
// since SeparateTaintEvictionController went GA.
//
// Guarantees, as KCM v1.37 does it:
//   - names: node-lifecycle-controller, alias nodelifecycle; its client
//     and ServiceAccount are KCM's "node-controller", and its events' source
//     is "node-controller"; flags --node-monitor-period (5s),
//     --node-monitor-grace-period (50s), --node-startup-grace-period (1m),
//     --node-eviction-rate (0.1), --secondary-node-eviction-rate (0.01),
//     --large-cluster-size-threshold (50), --unhealthy-zone-threshold
//     (0.55), with KCM's help;
//   - health: every monitor period, each cached node is judged (eight at a
//     time). The controller keeps, per node, a probe time by its own clock:
//     set when the Ready condition's heartbeat changes or the node's Lease
//     is renewed (a later renewTime), never from the node's timestamps.
//     A node silent for longer than --node-monitor-grace-period (or
//     --node-startup-grace-period if it never posted a Ready condition) gets
//     Ready, MemoryPressure, DiskPressure and PIDPressure set to Unknown
//     (reason NodeStatusUnknown, "Kubelet stopped posting node status.", a
//     new transition time; a condition never posted is added with reason
//     NodeStatusNeverUpdated, "Kubelet never posted node status.", and the
//     node's creation time as heartbeat); NetworkUnavailable is left alone.
//     The write is an UpdateStatus of the cached node, retried up to five
//     times on a fresh read;
//   - the NodeControllerLeaseCircuitBreaker gate (beta, on): before a node
//     is marked Unknown its live Lease is read; if it differs from the
//     cached one, that node is skipped and no node is judged until the
//     Lease informer's store has synced past the live resourceVersion (when
//     client-go reports it);
//   - NoSchedule taints (TaintNodesByCondition): on every node event, the
//     node gets node.kubernetes.io/not-ready or unreachable for Ready
//     False or Unknown, memory-pressure, disk-pressure, pid-pressure and
//     network-unavailable for those conditions True, and unschedulable for
//     spec.unschedulable; such taints that no longer apply are removed;
//     beta.kubernetes.io/os and arch follow their stable labels;
//   - NoExecute taints: a node whose Ready is False or Unknown is queued in
//     its zone (topology region and zone labels) and tainted not-ready or
//     unreachable:NoExecute (the other one removed: they are exclusive) by
//     a pass every 100ms that takes one token of the zone's limiter per
//     node (burst 1); a node already carrying the opposite taint is swapped
//     at once; a Ready node loses both and leaves the queue; a node first
//     seen loses both too. Taints get a timeAdded; writes are strategic
//     merge patches of spec.taints after a read (resourceVersion 0 first),
//     retried on conflict with KCM's back-off;
//   - zones: a zone with no Ready node (of those without the
//     node.kubernetes.io/exclude-disruption label) is FullDisruption; one
//     with more than two not Ready and at least --unhealthy-zone-threshold
//     of them is PartialDisruption, its rate the secondary rate if it has
//     more than --large-cluster-size-threshold nodes, else zero; others are
//     Normal at --node-eviction-rate. When every zone is fully disrupted,
//     every node loses its NoExecute taints and tainting stops; when one
//     recovers, probe times restart and rates follow the zones' states;
//   - pods: when a node turns not Ready, its pods' Ready conditions are
//     set False (a Warning NodeNotReady event each), retried next pass on
//     failure; a pod bound later to a node not Ready is marked too;
//   - cache: nodes and Leases are read whole (a node's status is written
//     back whole, as KCM's UpdateStatus does); of pods, only spec.nodeName
//     and status.conditions (WithReads), indexed by node;
//   - events RegisteredNode, RemovingNode and NodeNotReady on nodes;
//     metrics node_collector_zone_health, zone_size,
//     unhealthy_nodes_in_zone, evictions_total,
//     update_node_health_duration_seconds and
//     update_all_nodes_health_duration_seconds.
//
// Differences from KCM:
//   - a pod's Ready condition is written by a strategic merge patch of
//     status.conditions carrying the cached resourceVersion, not an
//     UpdateStatus of the whole cached pod: the host's pod cache keeps
//     only spec.nodeName and status.conditions for this controller. The
//     outcome, and the conflict on a stale cache, are the same;
//   - a failed NoSchedule taint or label write is retried with back-off
//     (KCM drops it until the node's next event);
//   - no DaemonSet informer is held (KCM starts one and never reads it);
//   - when several zones were known and none is left fully disrupted, KCM
//     walks them in map order and stops at the first not fully disrupted
//     one; here the walk is in zone-name order, so which stale zones are
//     dropped in that pass is deterministic;
//   - SeparateTaintEvictionController is GA and locked on in 1.37: taint
//     eviction is never run inside this controller.
//
// Non-guarantees: health is judged on the monitor period's ticks, so a
// node is marked Unknown up to one period after its grace period ends; as
// in KCM, the pass after a node's status heartbeat changed takes its Lease
// as renewed (the Lease seen with the older status is not kept), so a
// node's silence counts from that pass;
// NoExecute taints come at each zone's rate, in the order nodes were
// queued. The zone queues and probe times are in memory: a new leader
// starts over (every node's probe time is "now" when first seen).
//
// Not sharded: zone states and eviction rates are computed over every node
// of the cluster, and the health pass is cheap per node.
package nodelifecycle
