// Package ctbpublisher is kube-controller-manager's
// kube-apiserver-serving-clustertrustbundle-publisher controller, native:
// it publishes the CA that signs the kube-apiserver's serving certificates
// in a ClusterTrustBundle of signer kubernetes.io/kube-apiserver-serving,
// and deletes the signer's other bundles.
//
// Guarantees, as KCM v1.37 does it:
//   - names: kube-apiserver-serving-clustertrustbundle-publisher-controller,
//     no alias; its client is KCM's
//     "kube-apiserver-serving-clustertrustbundle-publisher" (the
//     ServiceAccount under --use-service-account-credentials, whose RBAC
//     the API server bootstraps while its ClusterTrustBundle gate is on);
//     one worker; --root-ca-file is its one flag, shared with the root CA
//     publisher and the service-account token controller;
//   - it does not start when the ClusterTrustBundle feature gate is off
//     (GA and on by default in 1.37; read through the host's gate when the
//     host registers FeatureSpecs, else its default), when no CA is
//     configured, or when discovery says the API server does not serve
//     certificates.k8s.io/v1 clustertrustbundles; a discovery failure, or
//     a CA that is not PEM certificates, fails its start;
//   - the CA is --root-ca-file's (Options.RootCA for a host that holds it
//     in memory), else the CA data of the controller's client
//     configuration, read once at start;
//   - the bundle is named as KCM names it (BundleName: the signer name
//     with colons for slashes, a colon, then the first twelve bytes of the
//     CA's SHA-256 in hex) and holds the CA exactly; it is created when
//     missing and updated when its content differs; then every other
//     bundle of the signer is deleted (a deletion that fails does not stop
//     the others; the sync is retried with back-off); other signers'
//     bundles are never touched;
//   - it syncs once its cache has synced and again after any change to a
//     bundle of the signer; no event is recorded;
//   - KCM's metrics, on the host's registry:
//     clustertrustbundle_publisher_sync_total and
//     clustertrustbundle_publisher_sync_duration_seconds, by the code of
//     each sync's outcome (200, an API error's code, else 500).
//
// Differences from KCM:
//   - KCM falls back to certificates.k8s.io/v1beta1, then v1alpha1, when
//     the API server does not serve v1; this controller serves v1 only and
//     does not start otherwise. A v1.37 API server serves v1 whenever its
//     ClusterTrustBundle gate is on (the older versions need the gate and
//     --runtime-config as well), and KCM v1.37 is not to run against an
//     older API server.
//   - With neither --root-ca-file nor CA data in the client configuration
//     but a CA file there, KCM does not start; this controller publishes
//     the CA file's bundle, as ctrlhost's root CA publisher does.
//   - KCM watches the signer's bundles through an informer of its own with
//     a field selector; this controller shares the host's informer of
//     every ClusterTrustBundle (declared, so that warm standby keeps it)
//     and filters by signer.
//
// Not sharded: there is one bundle to keep.
//
// Non-guarantees: a CA rotated in --root-ca-file is published at the next
// start, as in KCM. Under warm standby the informer of ClusterTrustBundles
// is kept warm even where the API server does not serve them (its list
// then fails and is retried; nothing else is held back).
package ctbpublisher
