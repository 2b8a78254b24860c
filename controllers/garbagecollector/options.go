package garbagecollector

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "garbage-collector-controller"
	Alias = "garbagecollector"
)

// defaultConcurrentGCSyncs is KCM's default worker count.
const defaultConcurrentGCSyncs = 20

// syncPeriod is how often discovery is refreshed and, at start, the
// longest the workers wait for the graph to sync (KCM's 30 seconds).
const syncPeriod = 30 * time.Second

// clientName is the user agent suffix of the collector's clients, KCM's.
const clientName = "generic-garbage-collector"

// defaultIgnoredResources returns KCM's default GCIgnoredResources: the
// resources the collector never watches (events of both API groups).
func defaultIgnoredResources() []schema.GroupResource {
	return []schema.GroupResource{
		{Group: "", Resource: "events"},
		{Group: "events.k8s.io", Resource: "events"},
	}
}

// Options configures the garbage collector. Use NewOptions for KCM's
// defaults.
type Options struct {
	// EnableGarbageCollector is --enable-garbage-collector (default true):
	// false makes the InitFunc decline to start the controller, as KCM does.
	EnableGarbageCollector bool
	// ConcurrentGCSyncs is --concurrent-gc-syncs (default 20): how many
	// attempt-to-delete workers, and as many orphan workers, run. Must be
	// at least 1.
	ConcurrentGCSyncs int32
	// IgnoredResources are resources never watched nor collected; KCM's
	// GCIgnoredResources, which has no flag. Default:
	// defaultIgnoredResources().
	IgnoredResources []schema.GroupResource
}

// NewOptions returns KCM's defaults.
func NewOptions() Options {
	return Options{
		EnableGarbageCollector: true,
		ConcurrentGCSyncs:      defaultConcurrentGCSyncs,
		IgnoredResources:       defaultIgnoredResources(),
	}
}

// AddFlags binds --concurrent-gc-syncs and --enable-garbage-collector to o
// with KCM's names and help, o's current values as defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(&o.ConcurrentGCSyncs, "concurrent-gc-syncs", o.ConcurrentGCSyncs,
		"The number of garbage collector workers that are allowed to sync concurrently.")
	fs.BoolVar(
		&o.EnableGarbageCollector,
		"enable-garbage-collector",
		o.EnableGarbageCollector,
		"Enables the generic garbage collector. MUST be synced with the corresponding "+
			"flag of the kube-apiserver.",
	)
}

// Validate reports every invalid field.
func (o Options) Validate() error {
	var errs []error
	if o.ConcurrentGCSyncs < 1 {
		errs = append(
			errs,
			fmt.Errorf("--concurrent-gc-syncs: must be at least 1, got %d", o.ConcurrentGCSyncs),
		)
	}
	for i, r := range o.IgnoredResources {
		if r.Resource == "" {
			errs = append(
				errs,
				fmt.Errorf(
					"IgnoredResources[%d]: resource must not be empty (group %q)",
					i,
					r.Group,
				),
			)
		}
	}
	return errors.Join(errs...)
}

// depsFrom gathers the collector's clients from the host as KCM does: its
// deletes, patches and discovery go through the controller's own builder
// (under --use-service-account-credentials, as the collector's
// ServiceAccount), with twice the configured QPS, since every delete is
// preceded by a GET; the graph's informers are the term's (the host's
// credentials).
func depsFrom(cc descriptor.Context, o Options) (deps, error) {
	b := cc.ClientBuilder
	if b == nil {
		b = cc.RootClientBuilder
	}
	switch {
	case b == nil:
		return deps{}, errors.New("the garbage collector needs a client builder")
	case cc.RESTMapper == nil:
		return deps{}, errors.New(
			"the garbage collector needs the host's RESTMapper (descriptor.Context.RESTMapper)",
		)
	case cc.ObjectOrMetadataInformerFactory == nil:
		return deps{}, errors.New(
			"the garbage collector needs descriptor.Context.ObjectOrMetadataInformerFactory",
		)
	case cc.EventRecorder == nil:
		return deps{}, errors.New("the garbage collector needs an event recorder")
	}
	md, err := writeClient(b)
	if err != nil {
		return deps{}, fmt.Errorf("garbage collector metadata client: %w", err)
	}
	cs, err := b.Client(clientName)
	if err != nil {
		return deps{}, fmt.Errorf("garbage collector discovery client: %w", err)
	}
	dc := memory.NewMemCacheClient(cs.Discovery())
	started := cc.InformersStarted
	if started == nil {
		ch := make(chan struct{})
		close(ch)
		started = ch
	}
	return deps{
		metadata: md, discovery: dc, invalidate: dc.Invalidate, mapper: cc.RESTMapper,
		factory: cc.ObjectOrMetadataInformerFactory, informersStarted: started,
		recorder: cc.EventRecorder, metrics: cc.Metrics, ignored: o.IgnoredResources,
		workers: int(o.ConcurrentGCSyncs), syncPeriod: syncPeriod,
	}, nil
}

// writeClient is the metadata client for deletes and patches: from the
// builder's config with the QPS doubled, or, for a host without a config
// (ready-made clients), the builder's own metadata client.
func writeClient(b descriptor.ClientBuilder) (metadata.Interface, error) {
	cfg, err := b.Config(clientName)
	if err != nil {
		return b.MetadataClient(clientName)
	}
	if cfg.QPS == 0 {
		cfg.QPS = rest.DefaultQPS
	}
	cfg.QPS *= 2
	return metadata.NewForConfig(cfg)
}
