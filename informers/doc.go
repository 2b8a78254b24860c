// Package informers owns the shared informers of one term of a controller
// host: a typed SharedInformerFactory, a metadata-only factory, and a
// ForResource that answers with the typed informer where client-go has one
// and a metadata informer otherwise (so that generic controllers such as the
// garbage collector work for custom resources too). TypedFor adds typed
// factories restricted to one namespace, with the same lifecycle. Declared
// is the informer a descriptor's declaration names; a host keeps those
// warm ahead of a term under warm standby.
//
// Informers are reference-counted. Set.For(user) is a new holder of the
// Set for one user (a controller's start): every informer requested
// through it counts that holder, the event handlers added through it are
// recorded, and its Shutdown releases them. An informer no holder holds
// any more is stopped and dropped, and its cache freed; one that others
// hold goes on, untouched. That is how a host stops one controller while the others run
// (manager.SetControllers, descriptor WhenServed). The factories are the
// Set's own, not client-go's: client-go's cannot stop one informer of
// many. The typed one hands out informers through client-go's generated
// accessors, and its ForResource knows every resource client-go's does
// (read from those accessors; a test checks each against client-go's).
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
//   - With Options.Reads, a typed informer keeps only the fields its
//     holders declared they read (Fields), and drops the others before
//     they reach its cache. Holders that request an informer before it
//     starts share one, that keeps the union of what they read; a holder
//     that did not declare the resource reads it whole, and so do all who
//     share an informer with it. A holder that comes once an informer runs
//     and reads a field it drops gets an informer of its own, started at
//     the next Start: no holder ever reads a field it declared dropped.
//   - With Options.InternStrings, the strings of typed and metadata
//     informers' objects that repeat across objects share one copy;
//     values are unchanged.
//   - Synced answers without blocking, so readiness checks can call it.
//   - When Shutdown of a view returns, the event handlers its user added
//     through it are removed, the informers no other user holds are
//     stopped and their goroutines have ended, and the factories its user
//     added are shut down. What the Set itself (New's) requested stays until the Set's
//     Shutdown.
//
// Non-guarantees:
//   - A holder that reads a field it did not declare reads its zero value:
//     declarations are checked against the types (CheckFields), not
//     against what the code reads. Tests catch that (controllertest prunes
//     fixtures the same way).
//   - A Set belongs to one term; it holds no global state and must not be
//     reused after Shutdown (informers requested afterwards never start).
//   - Objects from listers are shared with every other reader: callers must
//     DeepCopy before they modify one.
//   - A factory's Start does not set the lifetime of what it starts: the
//     Set's first Start does. A factory's Shutdown does nothing.
package informers
