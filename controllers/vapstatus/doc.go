// Package vapstatus is kube-controller-manager's
// validatingadmissionpolicy-status controller, native: it type-checks the
// CEL expressions of every ValidatingAdmissionPolicy against the schemas
// of the kinds the policy matches, and writes what it found to the
// policy's status.typeChecking, with the generation it checked in
// status.observedGeneration.
//
// Guarantees, as KCM v1.37 does it:
//   - names: validatingadmissionpolicy-status-controller, no alias; its
//     client is KCM's "validatingadmissionpolicy-status-controller" (the
//     ServiceAccount under --use-service-account-credentials, whose RBAC
//     the API server bootstraps); enabled by default, under no feature
//     gate; --concurrent-validating-admission-policy-status-syncs
//     (default 5) workers;
//   - the checker is the API server library's (k8s.io/apiserver's
//     validating.TypeChecker, of the release KCM v1.37.1 builds with): the
//     kinds checked are those the policy's resource rules name without
//     wildcards (subresources left out, at most ten), found through the
//     host's REST mapper (reset once per policy when a resource is not
//     found); params are typed by paramKind; each expression and message
//     expression with a problem gets one warning naming its field and,
//     per kind, the CEL compiler's message; a kind whose schema cannot be
//     found is left out, as in KCM;
//   - a policy is checked when its generation is newer than its
//     status.observedGeneration, and its status is then applied
//     server-side, forced, by field manager
//     "validatingadmissionpolicy-status": observedGeneration and
//     typeChecking (empty when there is no warning, so warnings of an
//     earlier generation go); a failed apply is retried with back-off;
//   - adds and updates are watched, deletions are not; nothing else is
//     written; no event is recorded.
//
// Differences from KCM:
//   - KCM types built-in kinds by the OpenAPI definitions compiled into it
//     and other kinds by the API server's OpenAPI v3; this controller
//     types every kind by the API server's OpenAPI v3 (k8s.io/kubernetes,
//     where the compiled definitions live, is not a library ctrlhost
//     imports). For a v1.37 API server both give the same types: the
//     upstream module's TestVAPStatusSchemasAreKCMs compares every
//     built-in kind a v1.37.1 API server serves, descriptions, defaults
//     and two extensions that do not type an expression aside. With an API
//     server of another release, built-in kinds are typed as that server
//     serves them.
//   - Each resolution asks the API server for its list of OpenAPI v3
//     documents; a group version's document is fetched and parsed the
//     first time and again only when the server lists a new version of it
//     (KCM fetches and parses a custom resource's document at every
//     check). Parsed documents are kept: about 1.6 MB for the core group.
//   - --concurrent-validating-admission-policy-status-syncs=0 means the
//     default, 5, as a zero in KCM's configuration file does (KCM's flag
//     rejects it); a negative value is rejected.
//   - Updates that leave a policy's status caught up with its generation
//     are not queued (KCM queues them and its sync finds nothing to do).
//
// Not sharded: policies are cluster-scoped and few.
//
// Non-guarantees: the warnings' text is the CEL library's; a schema that
// cannot be fetched (the API server's OpenAPI failing, say) is logged by
// the library and its kind left out, as in KCM, and the policy is not
// checked again until its next generation.
package vapstatus
