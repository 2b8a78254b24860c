// Command widget-operator is an operator for a custom resource, Widget
// (example.ctrlhost.io/v1alpha1, config/crd.yaml), on ctrlhost: two
// controllers in one Manager, served on the operator's own HTTP server.
//
//   - widget-controller keeps, for each Widget, a ConfigMap of the same
//     name owned by it (controller reference: the garbage collector deletes
//     it with the Widget) holding spec.data and, under "secret-keys", the
//     sorted keys of the Secrets labelled example.ctrlhost.io/widget=<name>;
//     it reports status.configMap, status.secretKeys and a Ready condition
//     with observedGeneration. A finalizer, example.ctrlhost.io/release,
//     takes the label off those Secrets before the Widget goes.
//   - secret-requeuer watches Secrets and hands widget-controller the
//     Widget each one is labelled for, before and after every change
//     (descriptor.Context.Queues): one controller requeueing another's keys.
//
// The Widget is read through informers.Custom (Go types, no generated
// code), so its cache belongs to the term: readiness, warm standby,
// managedFields stripping and fencing cover it as they cover Secrets.
// manager.NewOperatorOptions puts the Lease in the pod's namespace and
// leaves the port to the operator: this one serves /healthz, /readyz and
// /metrics over HTTPS on 8443 (--secure-port), probes without credentials,
// metrics to callers the API server authenticates and authorizes (as
// kubebuilder's scaffold does). RBAC: config/rbac.yaml. The same
// operator on controller-runtime is in controllerruntime/ (a module of its
// own); docs/operators.md compares them.
//
//	kubectl apply -f examples/widget-operator/config/crd.yaml
//	go run ./examples/widget-operator --kubeconfig=$HOME/.kube/config
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/examples/widget-operator/api/v1alpha1"
	"github.com/ctrlhost/ctrlhost/logging"
	"github.com/ctrlhost/ctrlhost/manager"
)

// descriptors are the operator's controllers. Declaring the informers
// lets a follower keep them warm (--warm-standby).
func descriptors() []descriptor.Descriptor {
	return []descriptor.Descriptor{
		descriptor.New("widget-controller", newWidgetController).
			WithObjectType(v1alpha1.Resource, &v1alpha1.Widget{}).
			WithInformers(secretResource, configMapResource),
		descriptor.New("secret-requeuer", newSecretRequeuer).WithInformers(secretResource),
	}
}

func run(ctx context.Context, args []string) error {
	opts := manager.NewOperatorOptions()
	opts.Serving.SecurePort = 8443 // health, readiness and metrics over HTTPS, as kubebuilder's
	fs := pflag.NewFlagSet("widget-operator", pflag.ContinueOnError)
	opts.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, done, err := logging.ForProgram(opts.Logging, os.Stderr)
	if err != nil {
		return err
	}
	defer done()
	m, err := manager.NewBuilder("widget-operator").WithOptions(opts).WithLogger(log).
		Register(descriptors()...).Build()
	if err != nil {
		return err
	}
	return m.Run(ctx)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
