package manager

import (
	"fmt"
	"maps"
	"math"
	"os"
	"strings"
	"time"

	"github.com/ctrlhost/ctrlhost/leader"
	"github.com/ctrlhost/ctrlhost/logging"
	"github.com/ctrlhost/ctrlhost/serving"
	"github.com/ctrlhost/ctrlhost/shard"
)

// Options configures a Manager. The zero value is usable: every zero field
// takes the default its comment states, which is also KCM's. Defaulting
// happens in one place, WithDefaults, which returns a copy.
//
// Bind the fields to a command line with AddFlags; the flag names are
// kube-controller-manager's, so a KCM command line keeps working.
// AddFlagSections binds the same flags in the named sections of KCM's
// --help; AddProcessFlags and AddManagerFlags split them for a program
// with several Managers.
type Options struct {
	// Controllers selects controllers, as --controllers: "*" enables every
	// controller that is not disabled by default, "name" enables one, "-name"
	// disables one; the first entry that names a controller wins. Aliases
	// are accepted. Default: ["*"]. An empty non-nil slice enables nothing.
	Controllers []string

	// ControllerStartInterval spreads controller starts: each controller
	// waits a random time in [interval, 2·interval) before Run, as KCM's
	// jitter of 1.0 does. Default: 0 (no wait).
	ControllerStartInterval time.Duration

	// ControllerShutdownTimeout bounds how long a term waits for its
	// controllers to return once cancelled; those still running are named
	// in the error Run returns. Default: 10s.
	ControllerShutdownTimeout time.Duration

	// MinResyncPeriod: informers resync at a random period in
	// [MinResyncPeriod, 2·MinResyncPeriod). Default: 12h.
	MinResyncPeriod time.Duration

	// Kubeconfig is the path of a kubeconfig file; with Master empty too, the
	// in-cluster configuration is used. Ignored when the Builder was given a
	// REST config or clients.
	Kubeconfig string
	// Master overrides the API server address in the kubeconfig.
	Master string
	// KubeAPIQPS is the client-side QPS limit of each client. Default: 20.
	KubeAPIQPS float32
	// KubeAPIBurst is the client-side burst of each client. Default: 30.
	KubeAPIBurst int32
	// KubeAPIContentType is the content type of requests. Default:
	// "application/vnd.kubernetes.protobuf".
	KubeAPIContentType string

	// CloudProvider is the --cloud-provider name. By default it must be
	// empty or "external", as in kube-controller-manager since v1.31, and
	// descriptors marked CloudProvider() never run. A program that runs a
	// provider in-process says so with Builder.WithInProcessCloudProvider;
	// then a named provider is accepted and cloud loops run while one is
	// named. Default: "".
	CloudProvider string
	// CloudConfig is the --cloud-config path: the provider's configuration
	// file, read by the program that builds the provider (the Manager does
	// not read it). Default: "" (no file).
	CloudConfig string

	// Serving configures the HTTPS endpoints (health, metrics, debug):
	// --bind-address (127.0.0.1), --secure-port (10257; 0 disables),
	// --tls-cert-file / --tls-private-key-file (self-signed in memory when
	// empty), delegated authentication and authorization through the API
	// server (health paths always open), --profiling. See package serving.
	Serving serving.Options

	// UseServiceAccountCredentials gives each controller a client that
	// authenticates as its own ServiceAccount (named after the controller,
	// in ServiceAccountNamespace, created if missing) with tokens from the
	// TokenRequest API, refreshed before they expire, as KCM's
	// --use-service-account-credentials does. Default: false (one
	// credential for all, with a per-controller user agent).
	UseServiceAccountCredentials bool
	// ServiceAccountNamespace holds the controllers' ServiceAccounts.
	// Default: "kube-system".
	ServiceAccountNamespace string
	// ClientBudgets overrides --kube-api-qps / --kube-api-burst for the
	// named controllers' clients.
	ClientBudgets map[string]ClientBudget

	// Logging configures the default logger (zap through zapr):
	// --logging-format (text|json; alias --log-format) and -v. Ignored when
	// the Builder is given a logger.
	Logging logging.Options

	// LeaderElect runs the leader-elected controllers only while this
	// replica holds the Lease. The zero Options leave it off (an embedded
	// manager opts in); NewOptions() and --leader-elect default to true, as
	// in KCM.
	LeaderElect bool
	// LeaderElection configures the main lock: --leader-elect-lease-duration
	// (15s), --leader-elect-renew-deadline (10s), --leader-elect-retry-period
	// (2s), --leader-elect-resource-lock (leases),
	// --leader-elect-resource-name (default: the component name) and
	// --leader-elect-resource-namespace (kube-system). Identity defaults to
	// "<hostname>_<uuid>", generated per Manager at Build.
	LeaderElection leader.Config
	// LostLeasePolicy says what happens when the lease is lost: "exit"
	// (default; Run returns an error wrapping leader.ErrLeaseLost once the
	// term has stopped, and a binary exits non-zero as KCM does) or
	// "recampaign" (stop the term fully, then stand again as a follower).
	LostLeasePolicy leader.LostLeasePolicy

	// WarmStandby (--leader-elect-warm-standby) makes a follower keep the
	// informers its controllers declare (descriptor.WithInformers) started
	// and synced, so that when it wins the lease its term starts on warm
	// caches instead of listing everything first. Its controllers are not
	// built and nothing is written until then; on taking over, each
	// controller runs as soon as it is built, without waiting for the
	// others (InformersStarted still closes after all of them). The cost
	// is a follower that holds the leader's cache (memory) and keeps its
	// watches open on the API server. Default: false.
	WarmStandby bool

	// EnableLeaderMigration splits controllers between the main lock and a
	// migration lock, per LeaderMigrationConfig. Without LeaderElect it is
	// ignored, with a warning, as KCM ignores it.
	EnableLeaderMigration bool
	// LeaderMigrationConfig is the path of a LeaderMigrationConfiguration
	// file (controllermanager.config.k8s.io v1alpha1, v1beta1 or v1). Empty
	// with EnableLeaderMigration uses leader.DefaultMigrationConfig. Without
	// EnableLeaderMigration it is ignored (not even read), with a warning,
	// as KCM ignores it.
	LeaderMigrationConfig string

	// Sharding (--enable-sharding, --shard-slots) shares the work of
	// sharded controllers (descriptor.Sharded) among every replica, each
	// working the slots of the key space it holds a slot Lease for, with
	// informers that hold only those slots' objects. Off by default: they
	// then run on the leader like any other controller. Needs LeaderElect
	// (ignored, with a warning, without it). See package shard.
	Sharding shard.Options

	// FeatureGates (--feature-gates) are set on the Builder's feature gate
	// by Build: the gate descriptors' required gates are checked against,
	// and that controllers read through descriptor.Context.FeatureGate
	// (upstream controllers: the process-wide gate the upstream module
	// passes). An unknown name is a Build error listing the known ones.
	FeatureGates map[string]bool

	// flagPrefix is the prefix AddManagerFlags bound these options' flags
	// under: messages name the flags so (renamer).
	flagPrefix string
}

// Defaults, as kube-controller-manager has them.
const (
	DefaultControllerShutdownTimeout = 10 * time.Second
	DefaultMinResyncPeriod           = 12 * time.Hour
	DefaultKubeAPIQPS                = 20
	DefaultKubeAPIBurst              = 30
	DefaultKubeAPIContentType        = "application/vnd.kubernetes.protobuf"
)

// NewOptions returns Options with every default filled in, ready for
// AddFlags.
func NewOptions() Options {
	return Options{LeaderElect: true, Serving: serving.NewOptions()}.WithDefaults()
}

// serviceAccountNamespaceFile is where a pod finds its namespace.
var serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// NewOperatorOptions is NewOptions shaped for an operator rather than a
// kube-controller-manager: leader election on, its Lease in the pod's own
// namespace when running in a cluster (the namespace file of the pod's
// ServiceAccount, else $POD_NAMESPACE, else kube-system, KCM's), so that
// the operator needs RBAC on Leases only there; and serving off, so that
// the operator picks its port (--secure-port, or Manager.Handler on a
// server of its own) instead of taking KCM's 10257. Every other default is
// KCM's. Bind it to flags with AddFlags as NewOptions is.
func NewOperatorOptions() Options {
	o := NewOptions()
	if ns := podNamespace(); ns != "" {
		o.LeaderElection.Namespace = ns
	}
	o.Serving.SecurePort = serving.PortDisabled
	return o
}

// podNamespace is the namespace this process runs in as a pod, or "".
func podNamespace() string {
	if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return strings.TrimSpace(os.Getenv("POD_NAMESPACE"))
}

// WithDefaults returns a copy of o with every zero field set to its default.
func (o Options) WithDefaults() Options {
	if o.Controllers == nil {
		o.Controllers = []string{"*"}
	} else {
		o.Controllers = append([]string(nil), o.Controllers...)
	}
	if o.ControllerShutdownTimeout == 0 {
		o.ControllerShutdownTimeout = DefaultControllerShutdownTimeout
	}
	if o.MinResyncPeriod == 0 {
		o.MinResyncPeriod = DefaultMinResyncPeriod
	}
	if o.KubeAPIQPS == 0 {
		o.KubeAPIQPS = DefaultKubeAPIQPS
	}
	if o.KubeAPIBurst == 0 {
		o.KubeAPIBurst = DefaultKubeAPIBurst
	}
	if o.KubeAPIContentType == "" {
		o.KubeAPIContentType = DefaultKubeAPIContentType
	}
	o.Serving = o.Serving.WithDefaults()
	if o.Logging.Format == "" {
		o.Logging.Format = logging.NewOptions().Format
	}
	if o.ServiceAccountNamespace == "" {
		o.ServiceAccountNamespace = "kube-system"
	}
	// The lock's own defaults, except the two that are per Manager and
	// filled by Build: the Lease name (the component) and the identity
	// (generated, so two Managers built from one Options never share it).
	name, identity := o.LeaderElection.Name, o.LeaderElection.Identity
	o.LeaderElection = o.LeaderElection.WithDefaults(name)
	o.LeaderElection.Identity = identity
	if o.LostLeasePolicy == "" {
		o.LostLeasePolicy = leader.Exit
	}
	o.Sharding = o.Sharding.WithDefaults()
	// The maps are the caller's: the Manager keeps copies.
	o.ClientBudgets = maps.Clone(o.ClientBudgets)
	o.FeatureGates = maps.Clone(o.FeatureGates)
	return o
}

// validate reports every invalid field of defaulted options.
// warnings lists settings KCM accepts and ignores, one sentence each.
func (o Options) warnings() []string {
	var out []string
	if o.EnableLeaderMigration && !o.LeaderElect {
		out = append(out,
			"--enable-leader-migration is ignored: leader migration only works with --leader-elect=true")
	}
	if o.Sharding.Enabled && !o.LeaderElect {
		out = append(out, "--enable-sharding is ignored: sharding needs --leader-elect=true; sharded "+
			"controllers run like any other")
	}
	if o.LeaderMigrationConfig != "" && !o.EnableLeaderMigration {
		out = append(out, fmt.Sprintf("--leader-migration-config %q is ignored (not read): "+
			"--enable-leader-migration is not set", o.LeaderMigrationConfig))
	}
	return out
}

func (o Options) validate() []error {
	var errs []error
	neg := func(flag string, d time.Duration) {
		if d < 0 {
			errs = append(errs, fmt.Errorf("--%s: must not be negative, got %v", flag, d))
		}
	}
	neg("controller-start-interval", o.ControllerStartInterval)
	neg("controller-shutdown-timeout", o.ControllerShutdownTimeout)
	neg("min-resync-period", o.MinResyncPeriod)
	if q := float64(o.KubeAPIQPS); q < 0 || math.IsNaN(q) || math.IsInf(q, 0) {
		errs = append(errs, fmt.Errorf("--kube-api-qps: must be a finite number, zero or more, got %v",
			o.KubeAPIQPS))
	}
	if o.KubeAPIBurst < 0 {
		errs = append(errs, fmt.Errorf("--kube-api-burst: must not be negative, got %d", o.KubeAPIBurst))
	}
	errs = append(errs, o.Serving.Validate()...)
	if err := o.Sharding.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.LostLeasePolicy != leader.Exit && o.LostLeasePolicy != leader.Recampaign {
		errs = append(errs, fmt.Errorf("--leader-elect-lost-lease-policy: %q is not a policy; use %q "+
			"or %q", o.LostLeasePolicy, leader.Exit, leader.Recampaign))
	}
	if err := o.Logging.Validate(); err != nil {
		errs = append(errs, err)
	}
	for name, b := range o.ClientBudgets {
		if q := float64(b.QPS); q < 0 || b.Burst < 0 || math.IsNaN(q) || math.IsInf(q, 0) {
			errs = append(errs, fmt.Errorf("ClientBudgets[%q]: QPS must be a finite number and QPS and "+
				"Burst must not be negative, got %v/%d", name, b.QPS, b.Burst))
		}
	}
	for i, c := range o.Controllers {
		if strings.TrimSpace(c) == "" || c == "-" {
			errs = append(errs, fmt.Errorf("--controllers: entry #%d is empty; use a "+
				"controller name, -name or *", i+1))
		}
	}
	return errs
}
