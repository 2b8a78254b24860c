// Package job is kube-controller-manager's Job controller as a ctrlhost
// descriptor: canonical name job-controller, alias job, enabled by "*",
// --concurrent-job-syncs workers (default 5).
//
// It runs each Job's pods and keeps its status, as KCM v1.37 does:
//   - parallelism and completions, in NonIndexed and Indexed completion
//     mode (completion-index annotation and label, hostname
//     "<job>-<index>", JOB_COMPLETION_INDEX from the label, generateName
//     "<job>-<index>-", status.completedIndexes as "1,3-5");
//   - finalizer tracking: every pod is created with the
//     batch.kubernetes.io/job-tracking finalizer; a finished pod is first
//     listed in status.uncountedTerminatedPods, then its finalizer is
//     removed, then it moves to status.succeeded or status.failed; active,
//     ready and terminating are reported;
//   - backoffLimit with the pod-creation back-off (10s after a failure,
//     doubling with each further consecutive failure, capped at 10 minutes,
//     counted from the newest failure since the last success);
//     backoffLimitPerIndex with maxFailedIndexes and status.failedIndexes;
//     restartPolicy OnFailure container restarts;
//   - podFailurePolicy (FailJob, Ignore, Count, FailIndex; onExitCodes,
//     onPodConditions), successPolicy (succeededIndexes, succeededCount),
//     activeDeadlineSeconds, podReplacementPolicy (TerminatingOrFailed or
//     Failed), suspend and resume (the Suspended condition, pods deleted,
//     startTime cleared on suspend and reset on resume);
//   - the interim conditions FailureTarget and SuccessCriteriaMet, then
//     Failed (reasons BackoffLimitExceeded, DeadlineExceeded,
//     PodFailurePolicy, MaxFailedIndexesExceeded, FailedIndexes) or Complete
//     (CompletionsReached, SuccessPolicy) once every pod is counted and none
//     is terminating; completionTime;
//   - events with KCM's reasons: SuccessfulCreate, FailedCreate,
//     SuccessfulDelete, FailedDelete, Completed, TooManySucceededPods,
//     Suspended, Resumed, UnknownCompletionMode and the Failed condition's
//     reason;
//   - spec.managedBy: a Job managed by another controller is never synced,
//     nor are its pods' finalizers touched.
//
// Guarantees:
//   - Expectations: after creating or deleting pods, a Job is not scaled
//     again until the informer showed them (or five minutes passed); after
//     removing finalizers, those pods are not counted twice.
//   - Orphans matching a Job's selector are adopted (the finalizer added in
//     the same patch) after an uncached re-read of the Job; owned pods that
//     stop matching are released (the finalizer removed). A pod left with
//     the finalizer by a Job that finished or went loses it through a
//     second queue.
//   - Event handlers only enqueue keys and update expectations; objects
//     from caches are never modified. A panic in a sync is recovered by
//     workloop and the key retried.
//
// Feature gates (read from the host's gate if it registers them, else
// their 1.37 defaults): JobManagedBy (GA, on), MutableSchedulingDirectives-
// ForSuspendedJobs (on: startTime cleared on suspend),
// StaleControllerConsistencyJob (on: after writing a Job's status or one of
// its pods, syncs of that Job wait until the informers delivered the
// write, at most a minute). FeatureSpecs lists them.
//
// Sharded by namespace: under --enable-sharding each replica works the Jobs
// of its slots, with caches of those slots only (KCM has no sharding;
// without the flag it runs on the leader as in KCM).
//
// Differences from KCM, and Non-guarantees:
//   - No Workload/PodGroup management (WorkloadWithJob, alpha and off in
//     1.37) and no job_controller metrics.
//   - Deletions are expected by pod name rather than counted, so a pod seen
//     first terminating and then deleted is observed once.
//   - Events come from the host's recorder (source: the controller's
//     name, as KCM's "job-controller"); a descriptor.Context without one is
//     an error. Work queues are named after the controller
//     ("job-controller" and "job-controller-orphan-pods", not "job" and
//     "job_orphan_pod").
//   - A Job lacking the API server's defaults (backoffLimit, parallelism)
//     is treated as defaulted (6, 1) rather than crashing the sync; an
//     Indexed Job without completions is dropped with an error.
//   - The back-off records live in memory, as in KCM: a new term (or a
//     restart) starts every Job's back-off afresh.
//   - A Job whose selector does not parse is dropped with an error until
//     it changes (KCM retries it with back-off).
//   - The staleness guard is workloop's: a held sync is retried after a
//     second rather than failed with back-off, and it is per object
//     (KCM's compares informer-wide resourceVersions). A pod that loses its
//     last finalizer while being deleted is not waited for, since its
//     deletion may be delivered before the write is recorded.
//   - Adoption and release go through controllers/internal/ownership, whose
//     patches are extended here with the finalizer change KCM's Job
//     adoption and release make.
package job
