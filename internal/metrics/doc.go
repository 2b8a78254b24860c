// Package metrics provides the Prometheus metrics of a controller host: the
// metrics client-go reports about work queues, REST requests and leader
// election, metrics about the hosted controllers, and an HTTP handler for
// /metrics.
//
// Nothing is registered at import time and the package has no init
// function. Metrics are exposed on a registry the caller passes in, usually
// one made by NewRegistry.
//
// # client-go metrics are process-wide
//
// client-go reports its metrics through process-global hooks, each of which
// can be set only once per process: workqueue.SetProvider,
// k8s.io/client-go/tools/metrics.Register and leaderelection.SetProvider.
// InstallClientGoProviders sets all three, once, to providers backed by
// process-wide metric vectors; RegisterClientGo makes a registry expose those
// vectors. A collector may be registered in several registries, so every
// registry a process builds shows the same values: two managers in one
// process share their workqueue_*, rest_client_* and leader_election_*
// series (they are told apart by the queue name, host and lease name
// labels, not by registry).
//
// Whoever sets a hook first wins. If another package set them earlier (for
// example by importing k8s.io/component-base/metrics/prometheus/workqueue,
// .../restclient or .../clientgo/leaderelection, whose init functions do so),
// InstallClientGoProviders has no effect on that hook and the corresponding
// metrics here stay empty. Work queues, REST clients and leader electors built before
// InstallClientGoProviders report nothing, since client-go reads the hooks
// when it builds them.
//
// # Controller metrics
//
// Controllers holds per-controller series (starts, running, panics,
// failures, health) and informer sync state, named under a namespace
// derived from the component name. They are per instance, not
// process-wide: each Manager makes its own.
package metrics
