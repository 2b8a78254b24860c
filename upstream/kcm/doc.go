// Package kcm hosts every kube-controller-manager controller of
// k8s.io/kubernetes (the version this module requires) on ctrlhost's
// Manager: Descriptors turns each entry of upstream's
// app.NewControllerDescriptors() into a descriptor.Descriptor, and Options
// holds upstream's own controller option groups, so that flags, defaults and
// validation are KCM's.
//
// It lives in its own module, github.com/ctrlhost/ctrlhost/upstream, because
// importing k8s.io/kubernetes brings its replace directives and several
// hundred packages; the root module never imports it. The native built-ins
// (github.com/ctrlhost/ctrlhost/controllers/...) are the importable
// alternative for the controllers they cover.
//
// # What each controller gets
//
// Upstream constructors take an app.ControllerContext. The controllers of
// one term share one, filled from the term's descriptor.Context:
//
//   - InformerFactory: the term's typed factory; ObjectOrMetadataInformerFactory:
//     upstream's composition of the term's typed and metadata factories;
//   - InformersStarted: closed when the term's closes (or the term ends);
//   - ResyncPeriod and RESTMapper: the term's (the host resets the mapper);
//   - ClientBuilder: the term's, so --use-service-account-credentials gives
//     each controller its ServiceAccount's token, and writes are fenced by
//     the term's lease; the …OrDie methods panic (recovered by the host,
//     which fails the controller) instead of exiting;
//   - ComponentConfig: Config.Component, built by Options.Config;
//   - ControllerManagerMetrics: upstream's, registered in
//     k8s.io/component-base's legacyregistry (serve it with
//     manager.Builder.WithMetricsGatherer);
//   - GraphBuilder: built as upstream builds it when the garbage collector
//     is enabled and selected, over the host's own metadata client.
//
// The service-account token controller is built here rather than by its
// upstream constructor, which needs the root client builder KCM passes at
// run time: it gets the term's RootClientBuilder.
//
// # Guarantees
//
//   - Names, aliases, required feature gates, disabled-by-default and the one
//     start-first controller are upstream's (tested against
//     app.NewControllerDescriptors()).
//   - Nothing of a term survives into the next: the ControllerContext,
//     graph builder and metrics proxy are built per term and forgotten when
//     its context ends.
//   - Upstream's feature-gate checks read utilfeature.DefaultFeatureGate;
//     build the Manager WithFeatureGate(utilfeature.DefaultMutableFeatureGate)
//     so that the host's --feature-gates and descriptor gates mean the same.
//
// # Non-guarantees
//
//   - Upstream controllers are upstream's code: one that calls klog.Fatal or
//     os.Exit ends the process whatever the host does (see docs/upstream.md for
//     the paths known).
//   - Controllers' own informers and queues are upstream's; the host's
//     staleness guard and work loop do not apply to them.
//   - KCM's --controller-start-interval jitter between controller starts
//     is not applied.
package kcm
