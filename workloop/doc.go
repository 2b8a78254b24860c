// Package workloop is the controller kit ctrlhost's built-in controllers
// use and operator authors may use: a named, rate-limited work queue with
// panic-safe workers, event-handler helpers that turn objects into
// "namespace/name" keys, and a staleness guard that holds a key back until
// the informer has caught up with the controller's own writes. It is plain
// client-go underneath (typed workqueue, shared informers, listers); it adds
// no cache.
//
// Guarantees:
//   - A key is never synced by two workers at once (workqueue's rule).
//   - A panic in a sync is recovered, counted in
//     workloop_sync_panics_total{controller}, logged with the controller
//     name, key and stack, and the key is retried with back-off; the process
//     keeps running.
//   - Run waits until every watched informer's handler has synced; if ctx is
//     done first it returns nil without starting a worker. Run returns only
//     after every worker has returned, and the queue is shut down on every
//     path out of Run.
//   - A nil error forgets the key's failures; Permanent errors are logged
//     and dropped; RequeueAfter schedules the key again without counting a
//     failure; any other error retries with the controller rate limiter
//     (per-key exponential plus overall token bucket), up to MaxRetries.
//   - Nothing is registered at import time. A loop created with
//     Options.Metrics counts on that registry's counters (in an InitFunc,
//     descriptor.Context.Metrics: the Manager's), so two Managers in one
//     process count apart. A loop without it counts on process-wide
//     counters, which reach a registry through RegisterMetrics.
//
// Non-guarantees:
//   - Ordering between keys, and exactly-once delivery: a key may be synced
//     again with nothing changed (resyncs, retries).
//   - A key dropped after MaxRetries or a Permanent error is only logged;
//     the next event for the object enqueues it again.
//   - The staleness guard never holds a key longer than Options.StaleTimeout
//     (for example when the written object is deleted before Wrote is
//     called, or is delivered only through an informer that does not feed
//     the loop). To recognise a write whose event arrived before Wrote, it
//     remembers the resourceVersions delivered to the loop in the last ten
//     seconds or so (a Wrote later than that after its own event holds its
//     key until the object's next delivery or StaleTimeout), and the UIDs
//     of objects whose deletion it delivered within the last StaleTimeout
//     (a write that let its object go is then not held). It holds no entry
//     per cached object. A write it gives up on is counted
//     (workloop_stale_writes_expired_total) and the first of each kind
//     logged, naming the object and the likely cause (a handler that does
//     not call Observe): the mistake is visible, not silent.
package workloop
