// Package fakeapi is an in-memory Kubernetes API server for tests: an
// http.Handler that serves the REST paths client-go uses for a registered
// set of resources, and a RoundTripper that reaches it without a network,
// so that real clients (typed, metadata, dynamic), real informers and the
// host's fenced transports run against it, also inside a testing/synctest
// bubble (every wait in it is on a channel).
//
// It is held to the contract table of test/integration/contract, which
// runs against kube-apiserver too (docs/testing.md shows it): every row
// holds here as there, or is answered with an error that names what is
// not modelled.
//
// Guarantees, where controllers depend on the API server:
//   - resourceVersions are one increasing counter over every write; a
//     write that changes nothing (update, patch, apply, a second delete)
//     writes nothing: the resourceVersion stays and watchers get no event;
//     an update or delete whose resourceVersion (or UID precondition) is
//     stale is a 409 Conflict, a create of an existing name a 409
//     AlreadyExists, an update without a resourceVersion of a custom
//     resource or a Lease (Resource.BuiltIn's rules) a 422; the Status
//     bodies are the API server's (apierrors reads them);
//   - metadata.generation per resource: 1 on create and bumped by changes
//     outside metadata (and status, with a status subresource) for a
//     custom resource, by the API server's rule for a built-in (spec; a
//     Deployment's annotations too; none for a ConfigMap), and when a
//     delete is held by finalizers or a grace period;
//   - the status subresource apart from spec (a custom resource's status
//     update ignores everything else it is sent); a create drops the
//     status of a resource with one;
//   - deletion as the generic registry does it: DeleteOptions'
//     preconditions, propagationPolicy (Foreground and Orphan add the
//     garbage collector's finalizers), a Pod bound to a node waiting out
//     its grace period, finalizers holding an object (deletionTimestamp)
//     until the last is removed, no new finalizer on an object being
//     deleted (422), delete of a collection; a namespace is marked
//     Terminating (spec.finalizers, the finalize subresource) and a create
//     in it is 403;
//   - dryRun=All answers every write as it would be, and stores nothing;
//   - patches: JSON merge; strategic merge with the directives, merge keys
//     and patch strategies of a built-in resource's Go type in client-go's
//     scheme (k8s.io/apimachinery's strategicpatch, as the API server),
//     415 for a custom resource; server-side apply with the API server's
//     field manager (k8s.io/apimachinery's managedfields): fieldManager
//     required, conflicts (409 unless force), fields a manager stops
//     applying removed, the status subresource applied apart;
//   - get, list (label selectors; field selectors on metadata.name,
//     metadata.namespace and the fields the API server indexes for Pods,
//     Events, Secrets, Namespaces, Nodes and a few more; limit and
//     continue, as of the first page), watch (from a resourceVersion, with
//     ADDED and DELETED as objects come to match a selector and stop
//     matching, the streaming initial list of sendInitialEvents ending in
//     its bookmark); metadata clients get PartialObjectMetadata;
//   - discovery of the served resources (AddResource and RemoveResource
//     as a CustomResourceDefinition is established and deleted: removal
//     sends DELETED for each object before the watches end), and
//     ServiceAccounts' TokenRequests;
//   - every request passes Server.Hook first, which may refuse it (fault
//     injection, fencing checks) or answer it, with its verb, resource,
//     user agent and body known;
//   - DropWatches ends every open watch, as an API server restart does, and
//     a watch from a resourceVersion older than the retained history gets
//     a 410 Gone (as its one event, as kube-apiserver's watch cache sends
//     it), so clients relist.
//
// Non-guarantees: JSON only (clients must use application/json; protobuf
// and CBOR bodies are refused); no admission but the namespace lifecycle's,
// no validation beyond names and the rules above, no defaulting (an unset
// Pod grace period counts as 30 s), no garbage collection, no
// authentication or authorization, no periodic bookmarks; objects may be
// created in namespaces that do not exist. Refused with an error naming
// them: JSON patches (415), lists at a past resourceVersion
// (resourceVersionMatch=Exact), field selectors the server does not index.
// metadata.managedFields is kept from an object's first server-side apply
// on (see fieldManagers): before it, writes record no manager.
package fakeapi
