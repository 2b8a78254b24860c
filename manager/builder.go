package manager

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"weak"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/healthz"
	"github.com/ctrlhost/ctrlhost/informers"
	"github.com/ctrlhost/ctrlhost/internal/featuregates"
	"github.com/ctrlhost/ctrlhost/internal/metrics"
	"github.com/ctrlhost/ctrlhost/internal/nometadata"
	"github.com/ctrlhost/ctrlhost/internal/selection"
	"github.com/ctrlhost/ctrlhost/internal/term"
	"github.com/ctrlhost/ctrlhost/logging"
	"github.com/ctrlhost/ctrlhost/serving"
)

// Builder collects what a Manager is made of. Its methods record and return
// the Builder; nothing is checked until Build, which reports every problem at
// once. A Builder is not safe for concurrent use.
type Builder struct {
	component   string
	descriptors []descriptor.Descriptor
	opts        Options
	restConfig  *rest.Config
	client      kubernetes.Interface
	metaClient  metadata.Interface
	dynClient   dynamic.Interface
	clientSet   bool
	featureGate featuregate.FeatureGate
	logger      *logr.Logger
	checks      []extraCheck
	registry    *prometheus.Registry
	gatherers   []prometheus.Gatherer
	cloud       bool // WithInProcessCloudProvider
	flags       []*pflag.FlagSet
	version     string
}

type extraCheck struct {
	check healthz.Check
	eps   []healthz.Endpoint
}

// NewBuilder starts a Manager for the named component. The component names
// the leader-election lease, prefixes client user agents and names metrics.
func NewBuilder(component string) *Builder {
	return &Builder{component: component}
}

// WithFlags gives the command line as the program parsed it: /flagz
// shows these flags (a flag annotated "classified" as CLASSIFIED), as
// KCM's does. Without it /flagz shows the Manager's own options, under
// their flag names.
func (b *Builder) WithFlags(sets ...*pflag.FlagSet) *Builder {
	b.flags = append(b.flags, sets...)
	return b
}

// WithVersion sets the version /statusz reports as the binary version.
// Default: the main module's version from the build information.
func (b *Builder) WithVersion(v string) *Builder {
	b.version = v
	return b
}

// Register adds controller descriptors, in the order they should be built.
func (b *Builder) Register(ds ...descriptor.Descriptor) *Builder {
	b.descriptors = append(b.descriptors, ds...)
	return b
}

// WithOptions sets the options; zero fields take their defaults. Without
// it Build uses the zero Options, defaulted: the same defaults, except that
// leader election is off, the safe choice for an embedded manager or a test.
// A program that takes a KCM command line passes NewOptions() (leader
// election on, as KCM's --leader-elect) bound to its flags.
func (b *Builder) WithOptions(o Options) *Builder {
	b.opts = o
	return b
}

// WithRESTConfig sets the API server configuration clients are made from.
// Zero QPS, Burst and ContentType in it are filled from Options. Without it
// (and without WithClient) Build loads --kubeconfig / --master, or the
// in-cluster configuration.
func (b *Builder) WithRESTConfig(c *rest.Config) *Builder {
	b.restConfig = c
	return b
}

// WithClient makes every controller and informer use the given clients,
// for example fake clientsets in unit tests. A nil metadata client is
// replaced by one that holds no objects. ClientBuilder.Config then fails, since
// there is no REST config to hand out.
func (b *Builder) WithClient(client kubernetes.Interface, meta metadata.Interface) *Builder {
	b.client, b.metaClient, b.clientSet = client, meta, true
	return b
}

// WithDynamicClient gives a Manager built WithClient the dynamic client its
// controllers' custom resource informers and DynamicClient use (for
// example a dynamic fake sharing the typed fake's objects). Without it such
// a Manager offers no dynamic informers. A Manager built from a REST
// config makes its own.
func (b *Builder) WithDynamicClient(client dynamic.Interface) *Builder {
	b.dynClient = client
	return b
}

// WithFeatureGate sets the gate that descriptors' WithFeatureGates are
// checked against and that controllers receive. Default: an empty gate, in
// which any required feature is reported by Build as unregistered.
func (b *Builder) WithFeatureGate(fg featuregate.FeatureGate) *Builder {
	b.featureGate = fg
	return b
}

// WithLogger sets the logger. Default: zap in production configuration,
// writing text to stderr.
func (b *Builder) WithLogger(l logr.Logger) *Builder {
	b.logger = &l
	return b
}

// WithMetricsRegistry sets the registry /metrics serves and the Manager
// registers its metrics in. Default: a new registry with the Go and process
// collectors. Nothing is registered anywhere at import time.
func (b *Builder) WithMetricsRegistry(reg *prometheus.Registry) *Builder {
	b.registry = reg
	return b
}

// WithMetricsGatherer adds a source that /metrics serves beside the
// registry, such as k8s.io/component-base's legacyregistry, where
// upstream Kubernetes controllers register their metrics. A metric family
// found in two sources is served once, merged as prometheus.Gatherers does
// (a clash of help or type is reported at scrape time).
func (b *Builder) WithMetricsGatherer(g prometheus.Gatherer) *Builder {
	b.gatherers = append(b.gatherers, g)
	return b
}

// WithInProcessCloudProvider declares that the program runs, in-process,
// the cloud provider --cloud-provider names: a cloud-controller-manager, or
// a kube-controller-manager from before in-tree providers were removed
// (v1.31). A named provider is then accepted, and descriptors marked
// CloudProvider() run while one other than "external" is named. Without it
// the Manager follows kube-controller-manager since v1.31: a named provider
// is an error telling to use "external", and cloud loops never run.
func (b *Builder) WithInProcessCloudProvider() *Builder {
	b.cloud = true
	return b
}

// WithHealthCheck adds a check of the caller's own to the given endpoints
// (all three when none are given).
func (b *Builder) WithHealthCheck(name string, c healthz.Checker,
	eps ...healthz.Endpoint) *Builder {
	if len(eps) == 0 {
		eps = []healthz.Endpoint{healthz.EndpointHealthz, healthz.EndpointLivez, healthz.EndpointReadyz}
	}
	b.checks = append(b.checks, extraCheck{healthz.Check{Name: name, Checker: c}, eps})
	return b
}

// Build validates everything recorded and returns a Manager. The error joins
// every problem: invalid component, descriptor registry problems, unknown
// --controllers entries, invalid options, unloadable kubeconfig, duplicate
// health checks. Build starts no goroutine and makes no API call.
func (b *Builder) Build() (*Manager, error) {
	opts := b.opts.WithDefaults()
	errs := b.validate(opts)
	set, err := descriptor.NewSet(b.descriptors...)
	if err != nil {
		errs = append(errs, err)
	}
	// --feature-gates are tried on a copy of the caller's gate: a Build
	// that fails leaves it as it was; one that succeeds sets them on it.
	given := b.featureGate
	if given == nil {
		given = featuregate.NewFeatureGate()
	}
	fg := given
	if mfg, ok := given.(featuregate.MutableFeatureGate); ok && len(opts.FeatureGates) > 0 {
		fg = mfg.DeepCopy()
	}
	if err := featuregates.Apply(fg, opts.FeatureGates); err != nil {
		errs = append(errs, err)
	}
	if opts.Serving.PairName == "" {
		opts.Serving.PairName = b.component
	}
	m := &Manager{
		component:   b.component,
		opts:        opts,
		featureGate: fg,
		started:     make(chan struct{}),
		reselected:  make(chan struct{}),
	}
	controllers, err := selection.Resolve(b.descriptors, opts.Controllers)
	if err != nil {
		errs = append(errs, err)
	}
	if err := b.clients(m, opts); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, b.observability(m, opts, set)...)
	p, perrs := newPlan(planInput{component: b.component, opts: opts, set: set,
		controllers: controllers, featureGate: fg,
		cloud:  selection.Cloud{InProcess: b.cloud, Provider: opts.CloudProvider},
		client: m.clients.Client, restConfig: m.clients.RESTConfig, log: m.log})
	errs = append(errs, perrs...)
	m.order, m.states, m.selected, m.locks = p.order, p.states, p.selected, p.locks
	m.host = m.newHost()
	for _, l := range p.notes {
		m.log.Info(l.msg, l.kv...)
	}
	h, herrs := b.endpoints(m, opts)
	errs = append(errs, herrs...)
	if fg != given {
		errs = append(errs, b.shareGate(m, given, len(errs) == 0))
		m.featureGate = given
	}
	if err := errors.Join(errs...); err != nil {
		return nil, opts.renameErr(fmt.Errorf("manager %q: invalid configuration:\n%w", b.component,
			err))
	}
	m.health = h
	m.handler = m.newMux(b.zpages(m))
	return m, nil
}

// validate checks the component name, the options and the descriptors'
// declared reads.
func (b *Builder) validate(opts Options) []error {
	var errs []error
	if b.component == "" {
		errs = append(errs, errors.New("component: must not be empty; pass a name such as "+
			"\"my-controller-manager\" to NewBuilder"))
	} else if msgs := validation.IsDNS1123Subdomain(b.component); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("component %q: must be a lowercase DNS-1123 "+
			"name (it names the lease): %s", b.component, strings.Join(msgs, "; ")))
	}
	errs = append(errs, opts.validate()...)
	if !b.cloud && selection.IncludesCloudLoops(opts.CloudProvider) {
		errs = append(errs, fmt.Errorf("--cloud-provider %q: built-in cloud providers are disabled, as "+
			"in kube-controller-manager since v1.31; set --cloud-provider=external and run a "+
			"cloud-controller-manager for %q", opts.CloudProvider, opts.CloudProvider))
	}
	for _, d := range b.descriptors {
		if err := informers.CheckFields(d.Reads()); err != nil {
			errs = append(errs, fmt.Errorf("descriptor %q: WithReads: %w; name a field of "+
				"the type, or leave the resource out to read it whole", d.Name(), err))
		}
	}
	return errs
}

// observability makes the Manager's logger, registry and controller
// metrics (set nil: no controller is known).
func (b *Builder) observability(m *Manager, opts Options, set *descriptor.Set) []error {
	var errs []error
	if b.logger != nil {
		m.log = *b.logger
	} else if l, flush, err := logging.New(opts.Logging, nil); err != nil {
		errs = append(errs, fmt.Errorf("logger: %w; pass one with WithLogger", err))
	} else {
		m.log, m.flushLog = l, flush
	}
	// Every line names the component: serving's, leader election's and
	// sharding's too, so that two Managers in one process can be told
	// apart; and the flags as this Manager's user types them.
	m.log = opts.renameLog(m.log.WithValues("component", b.component))
	m.registry = b.registry
	if m.registry == nil {
		m.registry = metrics.NewRegistry()
	}
	m.gatherer = prometheus.Gatherers(append([]prometheus.Gatherer{m.registry}, b.gatherers...))
	metrics.InstallClientGoProviders()
	m.metrics = metrics.NewControllers(b.component)
	if set != nil {
		m.metrics.Init(set.Names()...)
	}
	// workloop's counters reach the registry with the loops that count on
	// it (workloop.Options.Metrics: descriptor.Context.Metrics).
	for _, reg := range []func(prometheus.Registerer) error{metrics.RegisterClientGo,
		m.metrics.Register} {
		if err := reg(m.registry); err != nil {
			errs = append(errs, fmt.Errorf("metrics: %w", err))
		}
	}
	return errs
}

// endpoints makes the health checks' handler and the server (unless its
// options are invalid: they are reported once, with the other options).
func (b *Builder) endpoints(m *Manager, opts Options) (*healthz.Handler, []error) {
	var errs []error
	reg := m.healthChecks()
	for _, c := range b.checks {
		reg.Add(c.check, c.eps...)
	}
	h, err := reg.Handler()
	if err != nil {
		errs = append(errs, err)
	}
	// The served handler is resolved per request: it is built once every
	// check is known to be valid.
	served := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.handler.ServeHTTP(w, r)
	})
	if m.clients.Client != nil && len(opts.Serving.Validate()) == 0 {
		if m.server, err = serving.New(opts.Serving, served, m.clients.Client,
			m.log.WithName("serving")); err != nil {
			errs = append(errs, err)
		}
	}
	return h, errs
}

// shareGate sets --feature-gates on the caller's gate. Several Managers
// may share one gate (one process, one gate): flipping a gate that
// another one built or running set otherwise is an error, reported with
// the others, and not a silent change under its controllers (Run checks
// again). Unless valid (the Build succeeds), it only checks.
func (b *Builder) shareGate(m *Manager, given featuregate.FeatureGate, valid bool) error {
	if !valid {
		return featuregates.Check(given, m.opts.FeatureGates)
	}
	held := weak.Make(m)
	return featuregates.SetShared(given, m.opts.FeatureGates, m.component, func() bool {
		// Until its Run starts (then Claim holds), unless the program
		// dropped it unrun.
		m := held.Value()
		return m != nil && !m.ran.Load()
	})
}

// clients resolves the REST config and root clients.
func (b *Builder) clients(m *Manager, opts Options) error {
	m.clients.ServiceAccounts = opts.UseServiceAccountCredentials
	if len(opts.ClientBudgets) > 0 {
		m.clients.Budgets = make(map[string]term.Budget, len(opts.ClientBudgets))
		for name, b := range opts.ClientBudgets {
			m.clients.Budgets[name] = term.Budget(b)
		}
	}
	if b.clientSet {
		if b.client == nil {
			return errors.New("WithClient: the typed client must not be nil")
		}
		m.clients.Client, m.clients.Metadata, m.clients.Dynamic = b.client, b.metaClient, b.dynClient
		if m.clients.Metadata == nil {
			m.clients.Metadata = nometadata.Client{}
		}
		return nil
	}
	cfg := b.restConfig
	if cfg == nil {
		var err error
		cfg, err = clientcmd.BuildConfigFromFlags(opts.Master, opts.Kubeconfig)
		if err != nil {
			return fmt.Errorf("--kubeconfig %q / --master %q: cannot load a client configuration: %w",
				opts.Kubeconfig, opts.Master, err)
		}
	}
	return m.clients.FromConfig(cfg, term.Defaults{QPS: opts.KubeAPIQPS, Burst: opts.KubeAPIBurst,
		ContentType: opts.KubeAPIContentType, UserAgent: b.component,
		TokenNamespace: opts.ServiceAccountNamespace})
}

// newHost makes what the Manager's terms share, once its clients,
// observability and plan are made.
func (m *Manager) newHost() *term.Host {
	states := make(map[string]*term.State, len(m.states))
	for name, s := range m.states {
		states[name] = s.State
	}
	return &term.Host{
		Clients:         &m.clients,
		StartInterval:   m.opts.ControllerStartInterval,
		MinResyncPeriod: m.opts.MinResyncPeriod,
		Stop: term.StopBudget{Clock: m.opts.LeaderElection.Clock,
			Timeout: m.opts.ControllerShutdownTimeout},
		WarmStandby:      m.opts.WarmStandby,
		Metrics:          m.metrics,
		Registry:         m.registry,
		FeatureGate:      m.featureGate,
		States:           states,
		Failure:          controllerFailure,
		SelectionChanged: m.selectionChanged,
	}
}
