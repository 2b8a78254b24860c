// Package storageversiongc is kube-controller-manager's
// storageversion-garbage-collector controller, native: the entries
// StorageVersions keep for API servers that are gone (whose identity
// lease is gone) are removed, and a StorageVersion left with none is
// deleted.
//
// Guarantees, as KCM v1.37 does it:
//   - names: storageversion-garbage-collector-controller, alias
//     storage-version-gc; no flag (KCM has none); its client is KCM's
//     "storage-version-garbage-collector" (the ServiceAccount under
//     --use-service-account-credentials);
//   - it starts only with both of KCM's gates on, read through the host's
//     gate: APIServerIdentity (beta, on by default) and StorageVersionAPI
//     (alpha, off by default). By default it therefore does not start, as
//     in KCM: the InitFunc logs which gate is off and starts nothing;
//   - an identity lease is a Lease in kube-system labelled
//     apiserver.kubernetes.io/identity=kube-apiserver. When one is deleted
//     (a tombstone too) and a read of it from the API server finds it still
//     gone, every StorageVersion (listed from the API server) with an entry
//     for that API server loses it;
//   - a StorageVersion added or updated with an entry for an API server
//     the cache holds no identity lease of is read from the API server, and
//     loses every entry whose identity lease the API server does not have
//     (a lease that cannot be read counts as gone, as in KCM);
//   - a StorageVersion left with no entry is deleted; otherwise its status
//     is updated with the entries left, its common encoding version and
//     AllEncodingVersionsEqual condition set as the API server's own
//     updater sets them (the same rules, written here: the root module
//     keeps k8s.io/apiserver out of its graph);
//   - two work queues with one worker each, KCM's
//     storage_version_garbage_collector_leases and
//     storage_version_garbage_collector_storageversions, both started once
//     both caches (Leases of every namespace, StorageVersions) have synced;
//     a failed sync is retried with back-off, without end; several write
//     failures of one lease's sync are returned together; no event is
//     recorded.
//
// Differences from KCM: the controller runs only while the API server
// serves internal.apiserver.k8s.io/v1alpha1 StorageVersions (an alpha API,
// served only with --runtime-config and the API server's own
// StorageVersionAPI gate). With the gates on and the API not served, KCM's
// controller waits without end for a cache that cannot sync (its informer
// failing to list); this one waits in phase "unserved", ready, and starts
// when the API appears (and stops if it goes). With its gates off and the
// API not served it shows as "unserved", not as skipped.
//
// Not sharded: StorageVersions and identity leases are cluster-wide, and a
// lease's deletion concerns every StorageVersion.
//
// Non-guarantees: the cache only decides what is queued; what is removed
// is decided on live reads, as in KCM. A StorageVersion whose entry names a
// lease that is deleted later is pruned through the lease's deletion
// event; one missed while the controller was not running waits for the
// StorageVersion's next add or update (a restart replays it).
package storageversiongc
