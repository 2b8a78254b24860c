// Package cronjob is kube-controller-manager's CronJob controller as a
// ctrlhost descriptor: canonical name cronjob-controller, alias cronjob,
// enabled by "*", --concurrent-cron-job-syncs workers (default 5).
//
// It starts a CronJob's Jobs on its schedule and keeps its status, as KCM
// v1.37 does:
//   - spec.schedule in the standard five-field cron syntax (or @hourly and
//     the like), evaluated in spec.timeZone when set (else the host's local
//     zone); a schedule naming TZ or CRON_TZ is used as written and warned
//     about (UnsupportedSchedule); an unknown time zone (UnknownTimeZone), a
//     schedule that does not parse (UnparseableSchedule) or that never comes
//     (InvalidSchedule, February 31st) stops scheduling until the spec
//     changes;
//   - the Job started is the one for the latest unmet schedule time since
//     status.lastScheduleTime (else the creation time); more than 100 unmet
//     times record TooManyMissedTimes and still start the latest; past
//     startingDeadlineSeconds the time is skipped (MissSchedule);
//   - concurrencyPolicy Allow, Forbid (JobAlreadyActive while status.active
//     is not empty) and Replace (the active Jobs are deleted with background
//     propagation first, SuccessfulDelete); spec.suspend stops new Jobs;
//   - the Job is named "<cronjob>-<scheduled time in minutes since the
//     epoch>", carries the template's labels and annotations, the
//     batch.kubernetes.io/cronjob-scheduled-timestamp annotation (RFC 3339
//     in the CronJob's time zone) and the CronJob as controller; an existing
//     Job of that name is taken as created (or as someone else's);
//   - status.active (object references; finished Jobs leave it with
//     SawCompletedJob, Jobs gone from the API server with MissingJob),
//     status.lastScheduleTime and status.lastSuccessfulTime (the latest
//     completion time of a Complete Job); an unfinished controlled Job not in
//     status.active is reported (UnexpectedJob), not adopted;
//   - successfulJobsHistoryLimit and failedJobsHistoryLimit: the oldest
//     finished Jobs beyond them (by start time) are deleted;
//   - the CronJob is synced again at its next schedule time plus 100ms, and
//     whenever it or one of its Jobs changes (a changed schedule or time
//     zone waits for the new schedule's next time).
//
// Guarantees:
//   - One status write per sync at most; objects from caches are never
//     modified. Before reporting a Job unexpected, or dropping a listed Job
//     the cache lacks, the API server is asked.
//   - Only Jobs whose controller reference names the CronJob's UID are
//     considered; orphans are never adopted (nor by KCM).
//   - A panic in a sync is recovered by workloop and the key retried; a
//     failed sync is retried with back-off.
//   - Sharded by namespace: under --enable-sharding each replica works the
//     CronJobs of its slots, with caches of those slots only (KCM has no
//     sharding; without the flag it runs on the leader as in KCM).
//
// Non-guarantees: Job names are a lock per schedule time, but with Forbid
// a Job whose creation the cache has not shown yet can still overlap the
// next one (as in KCM). Schedule times are only as exact as the clock and
// the queue.
//
// Differences from KCM: no metrics (KCM exports
// cronjob_controller_job_creation_skew_duration_seconds); log messages
// differ; a missing time zone during Job creation is an error naming
// spec.timeZone. Not sharded (KCM has no sharding; it runs on the leader).
package cronjob
