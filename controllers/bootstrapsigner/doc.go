// Package bootstrapsigner is kube-controller-manager's bootstrap signer,
// native: the kubeconfig in the kube-public/cluster-info ConfigMap carries
// one detached JWS signature per bootstrap token that may sign, so that a
// joining node holding a token can trust the cluster's CA it reads there.
//
// Guarantees, as KCM v1.37 does it:
//   - names: bootstrap-signer-controller, alias bootstrapsigner, disabled
//     by default (name it in --controllers to run it); one worker; no flag
//     (KCM has none); its client is KCM's "bootstrap-signer" (the
//     ServiceAccount under --use-service-account-credentials, whose RBAC
//     the API server bootstraps);
//   - a token signs when it is a Secret of type bootstrap.kubernetes.io/token
//     in kube-system named bootstrap-token-<id> (six characters of
//     [a-z0-9]), whose data key token-id is that id, token-secret is not
//     empty, expiration (RFC 3339) is absent or not yet passed (one that does
//     not parse counts as passed), and usage-bootstrap-signing is "true";
//   - the ConfigMap's data key jws-kubeconfig-<id> holds, for each such
//     token, k8s.io/cluster-bootstrap's detached HS256 JWS of data key
//     kubeconfig, keyed by the token's secret with the id as "kid": the
//     signature KCM writes, byte for byte;
//   - whenever the ConfigMap or a bootstrap token of kube-system changes or
//     goes, the signatures are recomputed from the caches; if they differ
//     from the ConfigMap's jws-kubeconfig-* keys (one added, changed, or
//     left over from a token gone, expired or no longer signing), the
//     cached ConfigMap is updated with exactly the computed ones, its
//     other keys untouched. Nothing is written otherwise;
//   - a ConfigMap without a kubeconfig key, or no ConfigMap, is left alone
//     (stale signatures included); nothing else is written and no event is
//     recorded.
//
// Differences from KCM:
//   - a signing token that expires is signed off at its expiry: the key is
//     requeued for the first expiry of a signing token. KCM notices the
//     expiry only at the next event (the token cleaner's deletion of the
//     token, when that runs).
//   - a failed update is retried with back-off (the kit's MaxRetries does
//     not apply: it is 0, without end). KCM logs it at V(3) and waits for
//     the next event, and ignores a conflict, for which the ConfigMap's
//     update event requeues it (as here too).
//   - after its own update, a sync waits for the informer to deliver it
//     (the kit's staleness guard) instead of computing from the stale copy
//     and failing on a conflict.
//   - a signature go-jose cannot compute (it cannot fail for a non-empty
//     secret) is logged and left out; KCM would write an empty one.
//   - the ConfigMap's and tokens' namespaces and the ConfigMap's name are
//     Options (KCM's defaults, not flags), validated at Build.
//
// Not sharded: the controller keeps one ConfigMap and reads every token;
// there is nothing to split.
//
// Non-guarantees: signatures are computed from the caches, so they may lag
// a token's or the kubeconfig's change by the informer's delay; a token's
// expiry is judged by this host's clock. Duplicate token IDs cannot occur
// (the name carries the id and names are unique); should one, the first
// listed signs, as in KCM.
package bootstrapsigner
