// Package testenv runs a real etcd and kube-apiserver for tests.
//
// Start launches both from binaries that are already on the machine (built
// from the Go module proxy by cmd/testbin, which "make testbin" runs inside
// the ctrlhost repository and downstream modules run with
// "go run github.com/ctrlhost/ctrlhost/cmd/testbin@<version>", or any
// directory named by CTRLHOST_TESTBIN or KUBEBUILDER_ASSETS; see
// Options.BinDir for the lookup order), waits until the API server is
// ready, and returns an Env with an administrator rest.Config. Stop ends both
// processes and removes every file Start wrote. Nothing is downloaded at test
// time.
//
// What an Env guarantees:
//
//   - Both processes listen on 127.0.0.1 only, on ports picked at start;
//     a port lost to another process between picking and binding is retried
//     with fresh ports a few times.
//   - When Start returns without error, /readyz of the API server answers ok
//     (so the RBAC bootstrap roles exist) and the default and kube-system
//     namespaces exist.
//   - Each Env has its own temporary directory, ports, certificates, tokens
//     and etcd data; any number of Envs may run at once.
//   - The API server serves TLS with a certificate for 127.0.0.1 and localhost
//     signed by a CA generated for this Env. Clients authenticate with static
//     bearer tokens: the administrator is in system:masters, and each
//     Options.Users entry gets its own token.
//   - If Start fails, whatever it started has been stopped and its directory
//     removed. Stop is idempotent and also cleans up after a process that
//     crashed or was killed from outside. Both processes run in their own
//     process group, which Stop terminates (SIGTERM, then SIGKILL); on Linux
//     they are also killed if the test process dies.
//   - Every goroutine Start creates has ended when Stop returns.
//   - The certificates and keys are laid out as kubeadm's (PKI): a cluster
//     CA with its key (for signers such as KCM's --cluster-signing-*), a
//     front-proxy CA the API server is configured with and publishes in
//     kube-system/extension-apiserver-authentication, and the
//     service-account key pair; keys are 0600. WriteClientCert and
//     WriteClientCertKubeconfig issue client certificates the API server
//     accepts. The Env's service range (ServiceClusterIPRange) is not
//     kubeadm's 10.96.0.0/12; a controller manager given kubeadm's flags
//     only uses its own value for node IPAM.
//   - CustomResourceDefinitions (InstallCRDs, InstallCRDFiles,
//     Options.CRDPaths) are created, or updated if they exist, and the call
//     returns only when each is Established with its names accepted and its
//     resource is listed in the API server's discovery for every served
//     version, so clients and REST mappers made afterwards find it. Every
//     CRD and file is checked before the first request. UninstallCRDs
//     returns only when the CRD and its resource are gone from discovery;
//     the API server deletes the custom resources itself.
//   - RestartAPIServer brings kube-apiserver back on the same port against
//     the same etcd, so configs handed out before keep working and data
//     survives; it is not safe concurrently with other Env methods.
//
// What it does not do:
//
//   - It is not a cluster: there is no kubelet, scheduler, controller manager
//     or cloud controller, so Pods are never scheduled, Deployments never
//     create ReplicaSets, namespaces are never finalized after deletion and
//     garbage collection does not happen, and the aggregated ClusterRoles
//     (admin, edit, view) keep empty rules. Only the API server's own
//     controllers run. The default/kubernetes Service has no endpoints,
//     since a loopback address cannot be advertised in them.
//   - It cannot wait for an update to a CRD that keeps its names and
//     versions (a new schema, say), since discovery does not change: the
//     API server applies it within moments of InstallCRDs returning.
//   - It is not for production, and not hardened: tokens are written to disk
//     in plain text, etcd runs without TLS and without fsync.
//   - It does not guarantee that binaries found through KUBEBUILDER_ASSETS
//     are the Options.KubernetesVersion asked for; see
//     Options.SkipVersionCheck. What ctrlhost proves on each minor of the
//     tested window is what make matrix runs (docs/versioning.md).
//   - It runs only where process groups exist (Linux and other Unix systems).
package testenv
