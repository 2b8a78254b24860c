// Package cluster runs a cluster on one machine for tests: etcd and
// kube-apiserver (testenv), kube-scheduler, kwok as the kubelet of N
// simulated nodes, and one controller manager under test: upstream's
// kube-controller-manager v1.37.1 (the reference), ctrlhost's native
// examples/kcm, or the drop-in upstream/cmd/kube-controller-manager, each
// with kubeadm's command line. test/conformance runs upstream's e2e tests
// against it.
//
// Guarantees:
//
//   - Every binary comes from this machine: etcd, kube-apiserver,
//     kube-scheduler, kube-controller-manager and kwok are built from the
//     Go module proxy by internal/testbin (make clusterbin), the native and
//     drop-in managers from this repository's sources (BuildManagers).
//     Nothing is downloaded at run time.
//   - When Start returns, every node is Ready, the controller manager
//     answers /healthz, and a probe pod has been scheduled, started by kwok
//     (Running, with an IP of its node's pod CIDR) and removed (with
//     Manager None, only the nodes are Ready: the test starts replicas).
//   - Nodes may come in groups (NodeGroups), each run by a kwok of its
//     own: FailNodeGroup kills one, as when kubelets die.
//   - Replicas (StartReplica) reach the API server through a witness that
//     records every write they send, as themselves (their certificate's
//     identity by impersonation, their tokens as they are): Overlaps tells
//     whether two ever acted at once.
//   - kwok keeps each node's Lease and status fresh and plays the kubelet
//     for pods (stages.yaml): pods start Running and Ready; containers that
//     exit (judged from their command lines) end Succeeded or Failed, or
//     restart under OnFailure; unpullable images stay in ImagePullBackOff;
//     deleted pods end Failed and are removed.
//   - Each component runs in a process group of its own, logs to
//     <Dir>/<component>.log, and is stopped by Stop: SIGTERM, SIGKILL after
//     10 s; on Linux the kernel kills them if the test process dies. Stop
//     is bounded and idempotent.
//
// What kwok cannot model (and tests that need it fail under every
// controller manager): containers do not run, so there are no logs, exec,
// port-forward, probes, network traffic to pods or Services, volumes,
// or resource usage; no kube-proxy, DNS or CNI.
package cluster
