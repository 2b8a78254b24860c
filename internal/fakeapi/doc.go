// Package fakeapi is an in-memory Kubernetes API server for tests: an
// http.Handler that serves the REST paths client-go uses for a registered
// set of resources, and a RoundTripper that reaches it without a network,
// so that real clients (typed, metadata, dynamic), real informers and the
// host's fenced transports run against it, also inside a testing/synctest
// bubble (every wait in it is on a channel).
//
// Guarantees, where the host depends on the API server:
//   - resourceVersions are one increasing counter over every write; an
//     update or delete whose resourceVersion (or UID precondition) is stale
//     is a 409 Conflict, a create of an existing name a 409 AlreadyExists,
//     and the Status bodies are the API server's (apierrors reads them);
//   - get, list (label and metadata.name / metadata.namespace field
//     selectors), watch (from a resourceVersion, with bookmarks and the
//     streaming initial list of sendInitialEvents), create (generateName),
//     update, JSON merge and strategic merge patch (as a merge patch: no
//     list merging by key), delete and the status subresource's get and
//     update;
//   - every request passes Server.Hook first, which may refuse it (fault
//     injection, fencing checks), with its verb, resource, user agent and
//     body known;
//   - DropWatches ends every open watch, as an API server restart does, and
//     a watch from a resourceVersion older than the retained history is a
//     410 Gone, so clients relist.
//
// Non-guarantees: JSON only (clients must use application/json; protobuf
// and CBOR bodies are refused), no admission, no validation beyond names,
// no defaulting, no garbage collection, no finalizers, no server-side
// apply, no pagination (Limit is ignored and lists are whole).
package fakeapi
