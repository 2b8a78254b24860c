// Package informers owns the shared informers of one term of a controller
// host: a typed SharedInformerFactory, a metadata-only factory, and a
// ForResource that answers with the typed informer where client-go has one
// and a metadata informer otherwise (so that generic controllers such as the
// garbage collector work for custom resources too). TypedFor adds typed
// factories restricted to one namespace, with the same lifecycle. A Warm
// (StartWarm) is a Set started ahead of its term, for warm standby: only
// declared informers, their declared indexes built during the LIST.
//
// Guarantees:
//   - Started is closed by the first Start and never before it, so a
//     controller that waits on it knows every informer requested by then has
//     been started.
//   - Start, Synced, WaitForCacheSync and Shutdown cover every factory of
//     the Set, the namespaced ones included.
//   - Shutdown stops every informer the Set started and waits for their
//     goroutines to end; it is safe to call more than once, and after a
//     failed or partial start.
//   - By default every object stored in a cache has metadata.managedFields
//     removed, which controllers never read and which is often the largest
//     part of an object.
//   - Synced answers without blocking, so readiness checks can call it.
//
// Non-guarantees:
//   - A Set belongs to one term; it holds no global state and must not be
//     reused after Shutdown (informers requested afterwards never start).
//   - Objects from listers are shared with every other reader: callers must
//     DeepCopy before they modify one.
package informers
