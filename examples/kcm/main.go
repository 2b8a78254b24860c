// Command kcm is a kube-controller-manager built on ctrlhost with every
// built-in controller ctrlhost ships. It takes KCM's flags for the host and
// for those controllers, so a command line written for upstream KCM runs it
// unchanged as far as these controllers go; a flag ctrlhost does not
// implement is rejected as unknown, never silently ignored. It uses KCM's
// component name, so it competes for the same kube-system Lease.
//
//	go run ./examples/kcm --kubeconfig=$KUBECONFIG --controllers='*,tokencleaner' --leader-elect=false
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/controllers/cronjob"
	"github.com/ctrlhost/ctrlhost/controllers/daemonset"
	"github.com/ctrlhost/ctrlhost/controllers/deployment"
	"github.com/ctrlhost/ctrlhost/controllers/endpoints"
	"github.com/ctrlhost/ctrlhost/controllers/endpointslice"
	"github.com/ctrlhost/ctrlhost/controllers/garbagecollector"
	"github.com/ctrlhost/ctrlhost/controllers/job"
	"github.com/ctrlhost/ctrlhost/controllers/namespace"
	"github.com/ctrlhost/ctrlhost/controllers/podgc"
	"github.com/ctrlhost/ctrlhost/controllers/replicaset"
	"github.com/ctrlhost/ctrlhost/controllers/resourcequota"
	"github.com/ctrlhost/ctrlhost/controllers/rootcacertpublisher"
	"github.com/ctrlhost/ctrlhost/controllers/serviceaccount"
	"github.com/ctrlhost/ctrlhost/controllers/serviceaccounttoken"
	"github.com/ctrlhost/ctrlhost/controllers/tokencleaner"
	"github.com/ctrlhost/ctrlhost/controllers/ttlafterfinished"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/logging"
	"github.com/ctrlhost/ctrlhost/manager"
)

// component is KCM's name: the Lease, the user agent, the metrics prefix.
const component = "kube-controller-manager"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

// run parses args, builds and runs the manager, and returns the exit code:
// 0 on a clean stop, 1 on any error (a lost lease included, as KCM), 2 on a
// bad command line.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	host := manager.NewOptions()
	builtins := newBuiltinOptions()

	fs := pflag.NewFlagSet(component, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	host.AddFlags(fs)
	builtins.addFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %v\n", fs.Args())
		return 2
	}

	// The logger first, with client-go's klog routed into it, so that Build
	// already logs in the chosen format, to stderr.
	log, done, err := logging.ForProgram(host.Logging, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	defer done()

	// The gates the built-ins consult, so that --feature-gates sets them.
	gates := featuregate.NewFeatureGate()
	for _, specs := range builtinFeatureSpecs() {
		if err := gates.Add(specs); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
	}
	m, err := manager.NewBuilder(component).
		WithOptions(host).
		WithLogger(log).
		WithFeatureGate(gates).
		Register(builtins.descriptors()...).
		Build()
	if err != nil {
		fmt.Fprintln(stderr, err)
		if errors.Is(err, manager.ErrUnknownController) {
			fmt.Fprintln(stderr, "This program hosts ctrlhost's native built-ins only. Every kube-controller-manager controller "+
				"is in the upstream module's drop-in binary, github.com/ctrlhost/ctrlhost/upstream/cmd/kube-controller-manager.")
		}
		return 1
	}
	if err := m.Run(ctx); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}

// builtinOptions are the options of every built-in this program hosts.
type builtinOptions struct {
	rs  replicaset.Options
	gc  podgc.Options
	sa  serviceaccount.Options
	tc  tokencleaner.Options
	ca  rootcacertpublisher.Options
	ttl ttlafterfinished.Options
	dep deployment.Options
	ds  daemonset.Options
	job job.Options
	cj  cronjob.Options
	sat serviceaccounttoken.Options
	ns  namespace.Options
	rq  resourcequota.Options
	ep  endpoints.Options
	eps endpointslice.Options
	gcc garbagecollector.Options
}

// builtinFeatureSpecs are the feature gates the built-ins consult, with
// their Kubernetes 1.37 defaults.
func builtinFeatureSpecs() []map[featuregate.Feature]featuregate.FeatureSpec {
	return []map[featuregate.Feature]featuregate.FeatureSpec{
		replicaset.FeatureSpecs(), deployment.FeatureSpecs(), daemonset.FeatureSpecs(), job.FeatureSpecs(),
		resourcequota.FeatureSpecs(), endpointslice.FeatureSpecs(),
	}
}

func newBuiltinOptions() *builtinOptions {
	return &builtinOptions{
		rs: replicaset.NewOptions(), gc: podgc.NewOptions(), sa: serviceaccount.NewOptions(),
		tc: tokencleaner.NewOptions(), ca: rootcacertpublisher.NewOptions(), ttl: ttlafterfinished.NewOptions(),
		dep: deployment.NewOptions(), ds: daemonset.NewOptions(), job: job.NewOptions(), cj: cronjob.NewOptions(),
		sat: serviceaccounttoken.NewOptions(), ns: namespace.NewOptions(), rq: resourcequota.NewOptions(),
		ep: endpoints.NewOptions(), eps: endpointslice.NewOptions(), gcc: garbagecollector.NewOptions(),
	}
}

func (o *builtinOptions) addFlags(fs *pflag.FlagSet) {
	o.rs.AddFlags(fs)
	o.gc.AddFlags(fs)
	o.sa.AddFlags(fs)
	o.tc.AddFlags(fs)
	o.ca.AddFlags(fs)
	o.ttl.AddFlags(fs)
	o.dep.AddFlags(fs)
	o.ds.AddFlags(fs)
	o.job.AddFlags(fs)
	o.cj.AddFlags(fs)
	o.sat.AddFlags(fs) // shares --root-ca-file with the root-CA publisher
	o.ns.AddFlags(fs)
	o.rq.AddFlags(fs)
	o.ep.AddFlags(fs)
	o.eps.AddFlags(fs)
	o.gcc.AddFlags(fs)
}

// descriptors are the built-ins, in the order this program registers them.
func (o *builtinOptions) descriptors() []descriptor.Descriptor {
	return []descriptor.Descriptor{
		replicaset.Descriptor(o.rs),
		replicaset.ReplicationControllerDescriptor(o.rs),
		podgc.Descriptor(o.gc),
		serviceaccount.Descriptor(o.sa),
		tokencleaner.Descriptor(o.tc),
		rootcacertpublisher.Descriptor(o.ca),
		ttlafterfinished.Descriptor(o.ttl),
		deployment.Descriptor(o.dep),
		daemonset.Descriptor(o.ds),
		job.Descriptor(o.job),
		cronjob.Descriptor(o.cj),
		serviceaccounttoken.Descriptor(o.sat),
		namespace.Descriptor(o.ns),
		resourcequota.Descriptor(o.rq),
		endpoints.Descriptor(o.ep),
		endpointslice.Descriptor(o.eps),
		garbagecollector.Descriptor(o.gcc),
	}
}
