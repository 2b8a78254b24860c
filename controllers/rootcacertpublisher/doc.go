// Package rootcacertpublisher is kube-controller-manager's root CA
// certificate publisher as a ctrlhost descriptor: canonical name
// root-ca-certificate-publisher-controller, alias root-ca-cert-publisher,
// enabled by "*".
//
// It keeps a ConfigMap named kube-root-ca.crt in every namespace whose data
// is exactly {"ca.crt": <CA bundle>} and whose kubernetes.io/description
// annotation describes it, as KCM does: a missing ConfigMap is created, a
// deleted one is recreated, an edited one is put back. Pods use it to verify
// the API server (projected service account volumes mount it).
//
// The bundle is, in order: Options.RootCA; the file --root-ca-file names;
// the CA of the controller's client configuration (KCM's fallback). When
// none yields a bundle, the InitFunc returns (nil, nil) and the host reports
// that the controller chose not to start.
//
// Guarantees:
//   - Namespaces that are terminating or gone are skipped; a create refused
//     because the namespace is terminating is not an error.
//   - Only the data and that one annotation are written; other annotations,
//     labels and binaryData of the ConfigMap are kept. A non-empty
//     description annotation is not rewritten unless the data is wrong too.
//   - Objects from the informer are never modified; updates are
//     optimistic-concurrency writes retried with back-off on conflict.
//
// Non-guarantees and differences from KCM:
//   - KCM publishes whatever its client's CAData holds, even nothing; this
//     package does not start without a bundle, and it also reads the
//     client's CAFile. RootCA and --root-ca-file are checked to be PEM
//     certificates by manager.Builder.Build.
//   - A ConfigMap created by someone else is corrected on its creation (KCM
//     reacts only to updates and deletions), and terminating namespaces are
//     skipped before any API call.
//   - The bundle is read once per term; a changed file is picked up on the
//     next term, as KCM picks it up on restart.
//   - The client's user agent ends in the canonical name rather than KCM's
//     "root-ca-cert-publisher". No metrics.
package rootcacertpublisher
