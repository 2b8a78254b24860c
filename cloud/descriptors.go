package cloud

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"
	cloudnode "k8s.io/cloud-provider/controllers/node"
	cloudnodelifecycle "k8s.io/cloud-provider/controllers/nodelifecycle"
	"k8s.io/cloud-provider/controllers/route"
	"k8s.io/cloud-provider/controllers/service"
	"k8s.io/component-base/featuregate"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	cmfeatures "k8s.io/controller-manager/pkg/features"
	netutils "k8s.io/utils/net"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/ordie"
)

// Config is what the descriptors are built from.
type Config struct {
	// Cloud is the provider the controllers act on (NewProvider, or any
	// cloudprovider.Interface). Required.
	Cloud cloudprovider.Interface
	// Options are the controllers' settings (NewOptions for the defaults).
	Options Options
	// Component labels upstream's controller-manager metrics
	// (running_managed_controllers). Default: "cloud-controller-manager".
	Component string
}

// Descriptors returns the four cloud controllers, in upstream's order of
// names: cloud-node-controller, cloud-node-lifecycle-controller,
// service-lb-controller, node-route-controller. Each is marked
// CloudProvider(), so a Manager runs them only when built
// WithInProcessCloudProvider and --cloud-provider names a provider. An
// invalid Config makes each InitFunc fail with the reason.
func Descriptors(cfg Config) []descriptor.Descriptor {
	h := newHost(cfg)
	return []descriptor.Descriptor{
		h.descriptor(CloudNodeController, h.cloudNode),
		h.descriptor(CloudNodeLifecycleController, h.cloudNodeLifecycle),
		h.descriptor(ServiceLBController, h.serviceLB),
		h.descriptor(NodeRouteController, h.nodeRoute),
	}
}

// AddFeatureGates registers the gates the cloud controllers read
// (k8s.io/controller-manager/pkg/features) in gate, unless it has them
// already. The package registers them in k8s.io/apiserver's
// DefaultMutableFeatureGate when it is loaded, as upstream's
// cloud-controller-manager does, because node-route-controller reads that
// gate.
func AddFeatureGates(gate featuregate.MutableVersionedFeatureGate) error {
	if _, ok := gate.GetAll()[cmfeatures.CloudControllerManagerWatchBasedRoutesReconciliation]; ok {
		return nil
	}
	return cmfeatures.SetupCurrentKubernetesSpecificFeatureGates(gate)
}

func init() {
	if err := AddFeatureGates(utilfeature.DefaultMutableFeatureGate); err != nil {
		// Only a conflicting registration of the same names can fail, and
		// then node-route-controller's gate lookups would panic; say so at
		// once, while the program is starting.
		panic(fmt.Errorf("cloud: registering k8s.io/controller-manager's feature gates: %w", err))
	}
}

// host holds what the four descriptors share.
type host struct {
	cfg     Config
	err     error
	metrics *controllersmetrics.ControllerManagerMetrics

	mu    sync.Mutex
	terms map[<-chan struct{}]*sync.Once // provider initialisation, by the term's InformersStarted
}

func newHost(cfg Config) *host {
	if cfg.Component == "" {
		cfg.Component = "cloud-controller-manager"
	}
	h := &host{cfg: cfg, terms: map[<-chan struct{}]*sync.Once{}}
	var problems []string
	if cfg.Cloud == nil {
		problems = append(problems, "Config.Cloud is nil; build the provider with NewProvider")
	}
	for _, err := range cfg.Options.Validate() {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		h.err = fmt.Errorf("cloud controllers: %s", strings.Join(problems, "; "))
	}
	controllersmetrics.Register()
	h.metrics = controllersmetrics.NewControllerManagerMetrics(cfg.Component)
	return h
}

// builder makes one controller for a term: its client and the term's
// informers are in cc; the provider is initialised for the term.
type builder func(ctx context.Context, cc descriptor.Context,
	client kubernetes.Interface) (descriptor.Controller, error)

func (h *host) descriptor(name string, build builder) descriptor.Descriptor {
	return descriptor.New(name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		if h.err != nil {
			return nil, h.err
		}
		client, err := cc.ClientBuilder.Client(clientNames[name])
		if err != nil {
			return nil, err
		}
		h.initialize(ctx, cc)
		return build(ctx, cc, client)
	}).WithAliases(Aliases[name]).CloudProvider()
}

// initialize calls the provider's Initialize once per term, with the term's
// client builder and stop channel, as upstream calls it each time it starts
// controllers.
func (h *host) initialize(ctx context.Context, cc descriptor.Context) {
	h.mu.Lock()
	once, ok := h.terms[cc.InformersStarted]
	if !ok {
		once = &sync.Once{}
		key := cc.InformersStarted
		h.terms[key] = once
		context.AfterFunc(ctx, func() {
			h.mu.Lock()
			delete(h.terms, key)
			h.mu.Unlock()
		})
	}
	h.mu.Unlock()
	once.Do(func() {
		h.cfg.Cloud.Initialize(ordie.Builder{ClientBuilder: cc.ClientBuilder}, ctx.Done())
	})
}

func (h *host) cloudNode(ctx context.Context, cc descriptor.Context,
	client kubernetes.Interface) (descriptor.Controller, error) {
	o := h.cfg.Options
	c, err := cloudnode.NewCloudNodeController(cc.InformerFactory.Core().V1().Nodes(), client,
		h.cfg.Cloud, o.NodeStatusUpdateFrequency, o.ConcurrentNodeSyncs, o.ConcurrentNodeStatusUpdates)
	if err != nil {
		return notStarted(ctx, "failed to start cloud node controller", err)
	}
	return run(func(ctx context.Context) { c.RunWithContext(ctx, h.metrics) }), nil
}

func (h *host) cloudNodeLifecycle(ctx context.Context, cc descriptor.Context,
	client kubernetes.Interface) (descriptor.Controller, error) {
	o := h.cfg.Options
	c, err := cloudnodelifecycle.NewCloudNodeLifecycleController(
		cc.InformerFactory.Core().V1().Nodes(), client, h.cfg.Cloud,
		o.NodeMonitorPeriod, int(o.ConcurrentNodeLifecycleSyncs))
	if err != nil {
		return notStarted(ctx, "failed to start cloud node lifecycle controller", err)
	}
	return run(func(ctx context.Context) { c.Run(ctx, h.metrics) }), nil
}

func (h *host) serviceLB(ctx context.Context, cc descriptor.Context,
	client kubernetes.Interface) (descriptor.Controller, error) {
	o := h.cfg.Options
	// Upstream's New makes its two queues before it finds that the provider
	// has no load balancers, and nothing would ever shut them: ask first.
	if _, ok := h.cfg.Cloud.LoadBalancer(); !ok {
		return notStarted(ctx, "failed to start service controller",
			errors.New("the cloud provider does not support external load balancers"))
	}
	core := cc.InformerFactory.Core().V1()
	c, err := service.New(h.cfg.Cloud, client, core.Services(), core.Nodes(), o.ClusterName,
		cc.FeatureGate)
	if err != nil {
		return notStarted(ctx, "failed to start service controller", err)
	}
	return run(func(ctx context.Context) { c.Run(ctx, int(o.ConcurrentServiceSyncs), h.metrics) }), nil
}

func (h *host) nodeRoute(ctx context.Context, cc descriptor.Context,
	client kubernetes.Interface) (descriptor.Controller, error) {
	o := h.cfg.Options
	log := logr.FromContextOrDiscard(ctx)
	if !o.ConfigureCloudRoutes {
		log.Info("Will not configure cloud provider routes", "configure-cloud-routes", false)
		return nil, nil
	}
	routes, ok := h.cfg.Cloud.Routes()
	if !ok {
		log.Info("--configure-cloud-routes is set, but the cloud provider does not support routes; " +
			"will not configure cloud provider routes")
		return nil, nil
	}
	cidrs, err := clusterCIDRs(o.ClusterCIDR)
	if err != nil {
		return nil, err
	}
	c, err := route.New(routes, client, cc.InformerFactory.Core().V1().Nodes(), o.ClusterName, cidrs)
	if err != nil {
		return nil, err
	}
	period := o.RouteReconciliationPeriod
	return run(func(ctx context.Context) { c.Run(ctx, period, h.metrics) }), nil
}

// clusterCIDRs parses --cluster-cidr as upstream does: one CIDR, or two of
// different IP families.
func clusterCIDRs(value string) ([]*net.IPNet, error) {
	if strings.TrimSpace(value) == "" {
		return nil, fmt.Errorf("--cluster-cidr: required for %s (or set --configure-cloud-routes=false)",
			NodeRouteController)
	}
	cidrs, err := netutils.ParseCIDRs(strings.Split(strings.TrimSpace(value), ","))
	if err != nil {
		return nil, fmt.Errorf("--cluster-cidr %q: %w", value, err)
	}
	dual, _ := netutils.IsDualStackCIDRs(cidrs)
	switch {
	case len(cidrs) > 2:
		return nil, fmt.Errorf("--cluster-cidr %q: at most two CIDRs (one per IP family), got %d",
			value, len(cidrs))
	case len(cidrs) == 2 && !dual:
		return nil, fmt.Errorf("--cluster-cidr %q: two CIDRs must be of different IP families", value)
	}
	return cidrs, nil
}

// notStarted is upstream's answer to a constructor failure: the controller
// is not started, and the reason is logged.
func notStarted(ctx context.Context, msg string, err error) (descriptor.Controller, error) {
	logr.FromContextOrDiscard(ctx).Info("Not starting: "+msg, "reason", err.Error())
	return nil, nil
}

// run adapts an upstream Run that blocks until ctx ends.
func run(f func(ctx context.Context)) descriptor.Controller {
	return descriptor.ControllerFunc(func(ctx context.Context) error {
		f(ctx)
		return nil
	})
}

var _ cloudprovider.ControllerClientBuilder = ordie.Builder{}
