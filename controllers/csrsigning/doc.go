// Package csrsigning is kube-controller-manager's
// certificatesigningrequest-signing controller, native: it signs the
// approved certificate requests of the four kubernetes.io signers with a
// CA read from files, and marks Failed the requests a signer refuses.
//
// Guarantees, as KCM v1.37 does it:
//   - names: certificatesigningrequest-signing-controller, alias
//     csrsigning; enabled by "*"; five workers per signer it runs; its
//     client is KCM's "certificate-controller" (the ServiceAccount under
//     --use-service-account-credentials, whose RBAC the API server
//     bootstraps);
//   - flags and defaults: --cluster-signing-cert-file and
//     --cluster-signing-key-file (""), the CA of all four signers;
//     --cluster-signing-{kubelet-serving,kubelet-client,
//     kube-apiserver-client,legacy-unknown}-{cert,key}-file (""), one
//     signer's CA each, which exclude the cluster-wide pair: when any is
//     set, only the signers with their own pair sign (the others are
//     logged as skipped); --cluster-signing-duration (8760h);
//   - with no CA file at all the controller does not start (logged, as in
//     KCM); a CA file that cannot be read, whose key is not the
//     certificate's, or that holds other than one certificate fails the
//     start;
//   - a request is signed when it is approved and not denied, has no
//     True (or status-less) Failed condition and no certificate, and its
//     signer is one the controller runs; requests of other signers,
//     custom ones included, are left alone;
//   - each signer's checks, with KCM's messages, in KCM's order:
//     kubelet-serving: organization exactly [system:nodes], a DNS or IP
//     name, no email or URI name, usages {digital signature, server auth}
//     with or without key encipherment, common name beginning with
//     system:node:; kube-apiserver-client-kubelet: the same organization,
//     no name at all, that common name, usages {digital signature, client
//     auth} with or without key encipherment; kube-apiserver-client: client
//     auth, and nothing but digital signature and key encipherment besides;
//     legacy-unknown: none. A refused request gets a Failed condition,
//     status True, reason SignerValidationFailure, the check's message, and
//     lastUpdateTime now, written with UpdateStatus; it is not signed;
//   - the certificate: a random 128-bit serial, the request's subject, DNS,
//     IP, email and URI names and public key (the request's signature is
//     checked), none of its extensions, the key usages and extended key
//     usages asked for (extended ones once each, in ascending order), basic
//     constraints CA false; valid from five minutes before signing for
//     --cluster-signing-duration, or for spec.expirationSeconds when that is
//     shorter, raised to at least ten minutes; a certificate of eight hours
//     or more ends five minutes early (so it keeps its length), a shorter
//     one does not; none outlives the CA (it is cut at the CA's end, and an
//     expired CA signs nothing: the request is retried);
//   - the certificate is written PEM-encoded to status.certificate with
//     UpdateStatus; failures are retried with KCM's back-off (200ms
//     doubling to 1000s per request, 10 retries a second overall).
//
// The CA files are read again before each certificate is signed: a
// rotated CA signs from the next certificate on. A pair that does not hold
// (unreadable, empty, or a key that is not the certificate's, as while
// one file of two is rewritten) is logged once and the last pair that
// held is used; a pair that holds but is not exactly one certificate with
// a signing key fails signing (retried) until the files are fixed. KCM
// watches the files (fsnotify, and a check every minute) with the same
// rules; reading at signing time takes a rotation at the first signing
// after it, never later.
//
// Differences from KCM: --cluster-signing-cert-file without
// --cluster-signing-key-file (or the reverse) is an error at Build (KCM
// silently does not start the controller); a --cluster-signing-duration
// that is not positive is an error (KCM signs certificates that end at
// once). The per-signer flag pairs are checked as KCM checks them, with
// errors naming the flags. One queue serves all the signers run (KCM runs
// one per signer, each looking at every request): the same requests are
// signed. A request whose spec.request is not a PEM certificate request
// (which the API server refuses on create) is logged and dropped, not
// retried: the field is immutable. After a write the request's key is
// held until the informer has the write, so a stale copy is not signed a
// second time (KCM's second signing fails on a conflict and is retried).
// Not sharded: requests are cluster-scoped and few, and signing them
// twice would issue two certificates.
//
// Non-guarantees: kubernetes.io/legacy-unknown requests cannot be created
// through certificates.k8s.io/v1; only requests left over from older
// clusters reach that signer. Signing does not check that a certificate
// the API server would trust results: the CA is whatever the files hold.
package csrsigning
