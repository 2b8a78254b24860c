// Package disruption is kube-controller-manager's disruption controller,
// native: it keeps every PodDisruptionBudget's status, which the API
// server's eviction subresource reads to admit or refuse evictions, and
// resets pods' stale DisruptionTarget conditions.
//
// Guarantees, as KCM v1.37 does it:
//   - names: disruption-controller, alias disruption; its client is KCM's
//     "disruption-controller" (the ServiceAccount under
//     --use-service-account-credentials, whose RBAC the API server
//     bootstraps); its events' source is KCM's "controllermanager";
//     --concurrent-disruption-syncs (default 1) workers sync budgets, one
//     more resets stale conditions; no feature gate (the
//     PodObservedGenerationTracking gate it read is GA and locked on);
//   - status: currentHealthy counts the selected pods that are Ready, not
//     being deleted and not in disruptedPods within DeletionTimeout (two
//     minutes); an integer minAvailable makes desiredHealthy that number
//     and expectedPods the selected pods; a percentage minAvailable or any
//     maxUnavailable makes expectedPods the sum of the pods' controllers'
//     scales (each counted once, percentages rounded up) and
//     desiredHealthy that share of it (maxUnavailable: expectedPods minus
//     it, at least 0); disruptionsAllowed is currentHealthy minus
//     desiredHealthy, 0 when negative or when no pod is expected;
//     observedGeneration is the budget's generation; the DisruptionAllowed
//     condition is True/SufficientPods or False/InsufficientPods, its
//     transition time kept while its status holds; nothing is written when
//     all of that is already so;
//   - a pod's controller is found through its controller reference as KCM
//     finds it, in KCM's order: a ReplicationController; a ReplicaSet's
//     controlling Deployment; a ReplicaSet no Deployment controls; a
//     StatefulSet (all from the cache, their UIDs checked); then any kind
//     through its scale subresource, the resource found with the host's
//     REST mapper and read with a scale client built as KCM builds it (the
//     controller's REST config, a discovery-based scale-kind resolver); a
//     kind that serves no scale subresource is an error naming it;
//   - disruptedPods keeps only entries of selected pods not being deleted
//     whose two minutes have not passed; a pod whose entry expired gets a
//     NotDeleted warning (with KCM's text, which names the budget's
//     namespace twice), and the budget is synced again when its oldest
//     remaining entry expires;
//   - a sync that fails other than by a write conflict writes the
//     fail-safe status (disruptionsAllowed 0, DisruptionAllowed False with
//     reason SyncFailed and the error as message) and, as in KCM, is not
//     retried once that write succeeded; a conflict is retried with
//     back-off;
//   - KCM's events on the budget: NoPods (Normal, "No matching pods
//     found"; Warning when the selector is invalid),
//     CalculateExpectedPodCountFailed, UnmanagedPods (pods without a
//     controller under a percentage or maxUnavailable budget: the status is
//     still written, counting their controllers' scales only); on a pod
//     that several budgets select, MultiplePodDisruptionBudgets, and, as in
//     KCM, only the first of them (in cache order) is synced for its event;
//   - unhealthyPodEvictionPolicy is the eviction API's: the controller
//     only keeps the status it reads;
//   - a pod not being deleted and not terminal whose DisruptionTarget
//     condition is True, set by anyone but the kubelet
//     (TerminationByKubelet), for two minutes gets it reset to False, with
//     reason and message cleared and the pod's generation observed, as KCM
//     writes it.
//
// Differences from KCM: the stale DisruptionTarget reset is a strategic
// merge patch of the conditions (the pod's UID as precondition), not an
// UpdateStatus of the whole cached pod: the cache keeps only the pods'
// metadata, conditions and phase, and a whole-status write would clear
// the rest; a pod changed meanwhile is therefore not a conflict. The
// recheck of an expiring disruptedPods entry is a delayed add to the
// budget queue (KCM's separate recheck queue then adds it with the rate
// limiter's back-off). After a status write the budget's key is held
// until the informer delivered it (the kit's staleness guard), where KCM
// would sync the stale copy and fail with a conflict. Condition
// transition times and DisruptedPods expiry use the controller's clock,
// as KCM's do. A host built over ready-made clients (no REST config) has
// no scale client: a budget that needs a scale fails its sync there.
//
// Not sharded: a budget's status needs every pod it selects and every
// controller of those pods, which sharding by object would split.
//
// Non-guarantees: expectedPods under a percentage or maxUnavailable is
// only as fresh as the controllers' caches and the scale subresource;
// pods whose controllers are unknown make the sync fail until the budget
// or a pod changes (KCM's fail-safe, not retried); the eviction API and
// the controller race as in KCM, which is what disruptedPods is for.
package disruption
