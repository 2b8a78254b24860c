// Package garbagecollector is kube-controller-manager's garbage collector
// as a ctrlhost descriptor: canonical name garbage-collector-controller,
// alias garbagecollector, enabled by "*" (and by --enable-garbage-collector,
// true by default; false makes the InitFunc decline, as KCM does).
//
// It keeps a dependency graph of every object of every resource the
// server offers with the delete, list and watch verbs (less
// Options.IgnoredResources, KCM's events by default), linked by
// metadata.ownerReferences, and acts on it:
//
//   - An object all of whose owners are absent (looked up live, by name in
//     the object's namespace or cluster-wide, and compared by uid) is
//     deleted in the background (in the foreground or orphaning when it
//     carries that finalizer itself); when only some are absent, or some
//     are being deleted in the foreground while another exists, those
//     references are patched out.
//   - An owner deleted in the foreground (foregroundDeletion finalizer)
//     has its dependents deleted (in the foreground when they have
//     dependents of their own) and loses the finalizer once no dependent
//     with blockOwnerDeletion=true is left.
//   - An owner deleted with the orphan finalizer has its reference removed
//     from every dependent, then loses the finalizer.
//   - A reference to a namespaced owner that lives in another namespace is
//     reported with a Warning event, reason OwnerRefInvalidNamespace, on
//     the dependent, and treated as absent.
//   - Discovery is asked again every 30 seconds: new resources are watched,
//     vanished ones dropped, and the host's RESTMapper is reset.
//   - The controller is descriptor.Debuggable: /graph serves the graph as
//     a Graphviz DOT document (?uid=<uid>, repeatable, for the part
//     connected to those objects).
//
// Guarantees:
//   - Nothing is deleted on the strength of the cache alone: an owner is
//     absent only when a live GET says so (or a recent one did, remembered
//     for up to 500 owners), and deletes are preconditioned on the uid and
//     the resource version whose owner references were judged.
//   - The workers start once every monitor synced, or after 30 seconds
//     with those that did (as KCM).
//   - The graph's informers are the term's (ObjectOrMetadataInformerFactory,
//     the host's credentials); deletes, patches and discovery use the
//     controller's own client, generic-garbage-collector (its
//     ServiceAccount under --use-service-account-credentials), with twice
//     the configured QPS, as KCM's do.
//
// Non-guarantees and differences from KCM:
//   - The work queues hold uids, not graph nodes: a queued object is
//     judged as the graph knows it when its turn comes (KCM keeps the node
//     it queued, which may have been replaced since).
//   - Monitors of new resources are started even when another resource of
//     the same discovery round could not be mapped (KCM starts none of
//     them until every one maps).
//   - A resource that disappears from discovery loses the collector's event
//     handler; the shared informer itself belongs to the term and stops
//     with it (KCM likewise cannot stop a shared informer).
//   - Discovery goes through an in-memory cache that is invalidated before
//     every round, which amounts to KCM's uncached client.
//   - The InitFunc fails, naming the field, when the host's Context lacks
//     the RESTMapper, the ObjectOrMetadataInformerFactory or the event
//     recorder (every ctrlhost Manager passes them).
//   - A panic while updating the graph or syncing with discovery is logged
//     and the work goes on (KCM's crash handler re-panics).
//   - No garbage_collector_* metrics; the work queues' metrics are named
//     after the controller.
//   - The DOT rendering keys a missing owner's vertex by the owner's uid
//     (KCM's dump mistakenly re-keys the dependent).
//   - A cluster-scoped object referencing a namespaced owner is left alone,
//     as in KCM; the event is only recorded when the owner was observed.
package garbagecollector
