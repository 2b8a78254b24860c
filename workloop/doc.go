// Package workloop is the work loop every controller needs, on plain
// client-go: a named, rate-limited workqueue of keys, panic-safe workers, a
// retry policy, event handlers that turn informer events into keys, and a
// staleness guard. It adds no cache of its own: controllers keep using the
// typed listers of the informers they are given.
//
// A controller is a sync function over a key plus a few watches:
//
//	loop := workloop.New("configmap-mirror", c.sync, workloop.Options{Workers: 2})
//	if err := loop.Watch(cms.Informer(), workloop.EnqueueKey(), workloop.ResourceVersionChanged()); err != nil {
//		return nil, err
//	}
//	return loop, nil // a *Loop is a descriptor.Controller
//
// The sync function's result decides what happens to the key: nil forgets
// its failures; an error requeues it with the rate limiter's back-off;
// Permanent(err) drops it (logged); RequeueAfter(d) syncs it again after d
// without counting a failure.
//
// Guarantees:
//   - Run (and RunWorkers) waits for every watched informer's handler to
//     have synced before a worker starts, returns only after every worker
//     has returned, and shuts the queue down on every path, also when the
//     context ends before the caches synced.
//   - A key is never synced by two workers at once (workqueue's rule).
//   - A panic in the sync function is recovered, logged with the loop's
//     name, the key and the stack, counted
//     (workloop_sync_panics_total), and the key is requeued with
//     back-off: it never crashes the process or kills the worker.
//   - With a Guard, a key whose last write the informers have not yet
//     caught up with is not synced: the sync is skipped, counted
//     (workloop_stale_skips_total) and retried with back-off, as
//     kube-controller-manager's replicaset controller does since 1.36
//     (KEP-5647).
//
// Non-guarantees:
//   - Ordering between keys.
//   - A key dropped after MaxRetries or as Permanent is only logged; the next
//     event for its object enqueues it again.
//   - Panics in goroutines the sync function starts itself are not
//     recovered.
//   - Metrics reach /metrics only once RegisterMetrics was called on the
//     registry (manager.Builder does that for the Manager's registry).
package workloop
