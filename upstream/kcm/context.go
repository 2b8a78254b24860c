package kcm

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	"k8s.io/controller-manager/pkg/clientbuilder"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/ordie"
)

// componentName labels upstream's controller-manager metrics, as KCM's.
const componentName = "kube-controller-manager"

// termContext is upstream's ControllerContext for one term, built on the
// term's first InitFunc.
type termContext struct {
	mu    sync.Mutex
	done  bool
	uc    app.ControllerContext
	err   error
	graph bool // GraphBuilder considered
}

// get returns the term's ControllerContext; for a controller that uses the
// garbage collector's graph it includes the graph builder.
//
// The graph builder is made on the first such InitFunc, not with the
// context: its queues run until the garbage collector's Run shuts them,
// and the host calls Run on every controller it built, so made this late
// they are always shut.
func (t *termContext) get(ctx context.Context, cc descriptor.Context, cfg Config,
	withGraph bool) (app.ControllerContext, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.done {
		t.uc, t.err = newControllerContext(ctx, cc, cfg)
		t.done = true
	}
	if t.err == nil && withGraph && !t.graph {
		t.graph = true
		t.uc.GraphBuilder, t.err = newGraphBuilder(ctx, cc, cfg, t.uc)
	}
	return t.uc, t.err
}

// usesGraph names the upstream controllers that take the GraphBuilder.
var usesGraph = map[string]bool{
	names.GarbageCollectorController:       true,
	names.StorageVersionMigratorController: true,
}

// newControllerContext fills upstream's ControllerContext from the term's
// descriptor.Context, as upstream's CreateControllerContext fills it from
// its own: the term's factories, mapper and InformersStarted instead of new
// ones, the controllers' client builder (service-account credentials when
// the host uses them) and, for the garbage collector, a graph builder over
// the host's own metadata client.
func newControllerContext(ctx context.Context, cc descriptor.Context,
	cfg Config) (app.ControllerContext, error) {
	mapper, ok := cc.RESTMapper.(*restmapper.DeferredDiscoveryRESTMapper)
	if !ok {
		dc, err := clientBuilder{ordie.Builder{ClientBuilder: cc.RootClientBuilder}}.DiscoveryClient(
			"controller-discovery")
		if err != nil {
			return app.ControllerContext{}, err
		}
		mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	}
	uc := app.ControllerContext{
		ClientBuilder:   clientBuilder{ordie.Builder{ClientBuilder: cc.ClientBuilder}},
		InformerFactory: cc.InformerFactory,
		ObjectOrMetadataInformerFactory: informerfactory.NewInformerFactory(cc.InformerFactory,
			cc.MetadataInformerFactory),
		ComponentConfig:          *cfg.Component,
		RESTMapper:               mapper,
		InformersStarted:         relay(ctx, cc.InformersStarted),
		ResyncPeriod:             cc.ResyncPeriod,
		ControllerManagerMetrics: controllersmetrics.NewControllerManagerMetrics(componentName),
	}
	controllersmetrics.Register()
	return uc, nil
}

// newGraphBuilder builds the garbage collector's dependency graph as
// upstream does: only when the garbage collector is enabled and selected
// (nil otherwise), over the host's own metadata client.
func newGraphBuilder(ctx context.Context, cc descriptor.Context, cfg Config,
	uc app.ControllerContext) (*garbagecollector.GraphBuilder, error) {
	gc := cfg.Component.GarbageCollectorController
	if !gc.EnableGarbageCollector ||
		!uc.IsControllerEnabled(app.NewControllerDescriptors()[names.GarbageCollectorController]) {
		return nil, nil
	}
	meta, err := cc.RootClientBuilder.MetadataClient("metadata-informers")
	if err != nil {
		return nil, fmt.Errorf("garbage collector graph: %w", err)
	}
	ignored := make(map[schema.GroupResource]struct{}, len(gc.GCIgnoredResources))
	for _, r := range gc.GCIgnoredResources {
		ignored[schema.GroupResource{Group: r.Group, Resource: r.Resource}] = struct{}{}
	}
	return garbagecollector.NewDependencyGraphBuilder(ctx, meta, uc.RESTMapper, ignored,
		uc.ObjectOrMetadataInformerFactory, uc.InformersStarted), nil
}

// relay returns a channel closed once in is closed (the informers started)
// or the term ends, whichever comes first: upstream's ControllerContext
// wants a channel of its own type.
func relay(ctx context.Context, in <-chan struct{}) chan struct{} {
	out := make(chan struct{})
	go func() {
		defer close(out)
		select {
		case <-in:
		case <-ctx.Done():
		}
	}()
	return out
}

// clientBuilder is upstream's ControllerClientBuilder over ctrlhost's: its
// …OrDie methods panic (ordie.Builder), and it adds discovery clients.
type clientBuilder struct{ ordie.Builder }

var _ clientbuilder.ControllerClientBuilder = clientBuilder{}

func (c clientBuilder) DiscoveryClient(name string) (discovery.DiscoveryInterface, error) {
	cfg, err := c.Config(name)
	if err != nil {
		// Built over ready-made clients (tests): use the typed client's.
		cs, cerr := c.Client(name)
		if cerr != nil {
			return nil, err
		}
		return cs.Discovery(), nil
	}
	// Discovery asks many questions at once, rarely: a large burst that
	// refills in seconds, as upstream's builders give it.
	cfg.QPS, cfg.Burst = 20, 200
	return discovery.NewDiscoveryClientForConfig(cfg)
}

func (c clientBuilder) DiscoveryClientOrDie(name string) discovery.DiscoveryInterface {
	dc, err := c.DiscoveryClient(name)
	if err != nil {
		panic(fmt.Errorf("discovery client for %q: %w", name, err))
	}
	return dc
}
