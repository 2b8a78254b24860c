// Package csrapproving is kube-controller-manager's
// certificatesigningrequest-approving controller, native: it approves the
// kubelet's client certificate requests that the requester is authorized
// to have approved, and leaves every other request alone.
//
// Guarantees, as KCM v1.37 does it:
//   - names: certificatesigningrequest-approving-controller, alias
//     csrapproving; enabled by "*"; five workers; no flag (KCM has none);
//     its client is KCM's "certificate-controller" (the ServiceAccount
//     under --use-service-account-credentials, whose RBAC the API server
//     bootstraps: it may create SubjectAccessReviews and approve for the
//     kubernetes.io/kube-apiserver-client-kubelet signer);
//   - a request is considered when its signer is
//     kubernetes.io/kube-apiserver-client-kubelet, it has no certificate
//     and neither an Approved nor a Denied condition, and it is a kubelet
//     client request: organization exactly [system:nodes], common name
//     beginning with system:node:, no DNS, email, IP or URI name, and the
//     usages {digital signature, client auth}, with or without key
//     encipherment;
//   - when the requester (spec.username) is the common name, a
//     SubjectAccessReview asks whether the requester (its username, UID,
//     groups and extra) may create certificatesigningrequests/selfnodeclient
//     in certificates.k8s.io (version "*"); if not allowed, or when the
//     requester is someone else (a bootstrap token), a second review asks
//     about certificatesigningrequests/nodeclient;
//   - the first allowed review approves: an Approved condition, status
//     True, reason AutoApproved, message "Auto approving self kubelet client
//     certificate after SubjectAccessReview." or "Auto approving kubelet
//     client certificate after SubjectAccessReview.", appended through the
//     approval subresource (an Update of the cached request with the
//     condition added);
//   - when no review allows it, the request is retried, as in KCM, with
//     KCM's back-off (200ms doubling to 1000s per request, 10 retries a
//     second overall): permission granted later approves it;
//   - a request is never denied, and nothing but the approval is written.
//
// Differences from KCM: only the kubelet-client requests without a
// decision or certificate are queued (KCM queues every event of every
// request and drops the others in its sync; the outcome is the same). A
// request whose spec.request is not a PEM certificate request (which the
// API server refuses on create) is logged and dropped, not retried: the
// field is immutable. Not sharded: requests are cluster-scoped and few,
// and two instances approving one request would only conflict.
//
// Non-guarantees: an approval follows authorization as the API server
// answers it at the time of the review; a permission revoked afterwards
// does not undo it. The review is of the requester recorded in the
// request, which the API server sets from the creator's credentials.
package csrapproving
