// Package cloud hosts the cloud controllers of k8s.io/cloud-provider on
// ctrlhost: cloud-node-controller, cloud-node-lifecycle-controller,
// service-lb-controller and node-route-controller, with their upstream
// aliases (cloud-node, cloud-node-lifecycle, service, route), as
// descriptors marked CloudProvider() that take a cloudprovider.Interface.
// With them a cloud provider author builds a cloud-controller-manager on
// ctrlhost (see examples/cloud-controller-manager), or keeps the cloud
// controllers in a kube-controller-manager of its own during a migration.
//
// This is a Go module of its own (github.com/ctrlhost/ctrlhost/cloud), not a
// package of the root module: k8s.io/cloud-provider ties its requirements
// to one Kubernetes minor (k8s.io/apiserver, k8s.io/controller-manager,
// k8s.io/component-helpers at v0.37.x, and through their go.mod files etcd,
// gRPC, OpenTelemetry and CEL), and a root-module requirement would put all
// of them into the module graph of every ctrlhost user, raising the
// versions of those the user also depends on. What the controllers compile
// is small (about 15 packages beyond the root module's); the module
// boundary is about versions, not size. It never imports k8s.io/kubernetes.
//
// # Guarantees
//
//   - Names, aliases, client names (the user agent and service account
//     each controller acts as), flag names and defaults are
//     cloud-controller-manager v1.37's.
//   - The provider's Initialize is called once per term, before the term's
//     first cloud controller is built, with a client builder that hands out
//     the term's fenced clients, and the term's stop channel: as upstream,
//     which calls it each time it starts controllers.
//   - Each controller runs on the term's shared informers and returns from
//     Run only after upstream's Run returned. Upstream's constructors'
//     failures are reported as the controller's failure; a provider that
//     lacks the interface a controller needs (LoadBalancer, Routes,
//     Instances or InstancesV2) makes that controller choose not to start,
//     logged, as upstream.
//   - NewProvider never exits the process (cloudprovider.InitCloudProvider
//     does, on an unreadable --cloud-config).
//
// # Non-guarantees
//
//   - The controllers are upstream's code: their behaviour, retries and
//     events are k8s.io/cloud-provider v0.37's, including their own event
//     broadcasters and their metrics in component-base's legacyregistry
//     (serve it with manager.Builder.WithMetricsGatherer).
//   - node-route-controller reads the CloudControllerManagerWatchBasedRoutesReconciliation
//     gate from k8s.io/apiserver's process-wide DefaultFeatureGate, as
//     upstream; AddFeatureGates registers it there, and a program passes
//     that gate to manager.Builder.WithFeatureGate for --feature-gates to
//     reach it.
package cloud
