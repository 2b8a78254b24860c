package manager

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/ctrlhost/ctrlhost/internal/featuregates"
	"github.com/ctrlhost/ctrlhost/internal/flagprefix"
	"github.com/ctrlhost/ctrlhost/leader"
)

// AddFlags binds o's fields to fs under KCM's flag names, with o's current
// values as the defaults shown in help. Durations that must be positive
// (--controller-shutdown-timeout, --min-resync-period and the three
// --leader-elect-* durations), ports and the lost-lease policy are checked
// as the flags are parsed; how the durations relate to each other (renew
// deadline below lease duration, …) is checked by Build.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	*o = o.WithDefaults()
	fs.StringSliceVar(&o.Controllers, "controllers", o.Controllers, ""+
		"A list of controllers to enable. '*' enables all on-by-default controllers, 'foo' enables "+
		"the controller named 'foo', '-foo' disables the controller named 'foo'. The first entry "+
		"that names a controller wins.")
	fs.DurationVar(&o.ControllerStartInterval, "controller-start-interval", o.ControllerStartInterval,
		"Interval between starting controller managers; each controller waits a random time in "+
			"[interval, 2*interval) before it runs.")
	fs.Var(positiveDuration{&o.ControllerShutdownTimeout}, "controller-shutdown-timeout",
		"Time to wait for the controllers to shut down before terminating the executable.")
	fs.Var(positiveDuration{&o.MinResyncPeriod}, "min-resync-period",
		"The resync period in reflectors will be random between MinResyncPeriod and 2*MinResyncPeriod.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig,
		"Path to kubeconfig file with authorization and master location information.")
	fs.StringVar(&o.Master, "master", o.Master,
		"The address of the Kubernetes API server (overrides any value in kubeconfig).")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS,
		"QPS to use while talking with kubernetes apiserver.")
	fs.Int32Var(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst,
		"Burst to use while talking with kubernetes apiserver.")
	fs.StringVar(&o.KubeAPIContentType, "kube-api-content-type", o.KubeAPIContentType,
		"Content type of requests sent to apiserver.")
	fs.StringVar(&o.CloudProvider, "cloud-provider", o.CloudProvider,
		"The provider for cloud services. Empty string for no provider.")
	fs.StringVar(&o.CloudConfig, "cloud-config", o.CloudConfig,
		"The path to the cloud provider configuration file. Empty string for no configuration file.")
	o.Serving.AddFlags(fs)
	fs.Var(featuregates.Value(&o.FeatureGates), "feature-gates", ""+
		"A set of key=value pairs that describe feature gates for alpha/experimental features. "+
		"An unknown gate is an error listing the gates this program knows.")

	o.Logging.AddFlags(fs)
	fs.BoolVar(&o.UseServiceAccountCredentials, "use-service-account-credentials",
		o.UseServiceAccountCredentials,
		"If true, use individual service account credentials for each controller.")

	le := &o.LeaderElection
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, ""+
		"Start a leader election client and gain leadership before executing the main loop. "+
		"Enable this when running replicated components for high availability.")
	fs.Var(positiveDuration{&le.LeaseDuration}, "leader-elect-lease-duration", ""+
		"The duration that non-leader candidates will wait after observing a leadership renewal until "+
		"attempting to acquire leadership of a led but unrenewed leader slot. This is effectively the "+
		"maximum duration that a leader can be stopped before it is replaced by another candidate. "+
		"This is only applicable if leader election is enabled.")
	fs.Var(positiveDuration{&le.RenewDeadline}, "leader-elect-renew-deadline", ""+
		"The interval between attempts by the acting master to renew a leadership slot before it "+
		"stops leading. This must be less than the lease duration. This is only applicable if "+
		"leader election is enabled.")
	fs.Var(positiveDuration{&le.RetryPeriod}, "leader-elect-retry-period", ""+
		"The duration the clients should wait between attempting acquisition and renewal of a "+
		"leadership. This is only applicable if leader election is enabled.")
	fs.StringVar(&le.ResourceLock, "leader-elect-resource-lock", le.ResourceLock, ""+
		"The type of resource object that is used for locking during leader election. "+
		"Supported options is 'leases'.")
	fs.StringVar(&le.Name, "leader-elect-resource-name", le.Name, ""+
		"The name of resource object that is used for locking during leader election "+
		"(default: the component name).")
	fs.StringVar(&le.Namespace, "leader-elect-resource-namespace", le.Namespace, ""+
		"The namespace of resource object that is used for locking during leader election.")
	fs.BoolVar(&o.WarmStandby, "leader-elect-warm-standby", o.WarmStandby, ""+
		"Followers keep the informers their controllers declare synced, so that a new leader starts on "+
		"warm caches. Costs each follower the leader's cache memory and its watches. Not a "+
		"kube-controller-manager flag.")
	fs.Var(policyValue{&o.LostLeasePolicy}, "leader-elect-lost-lease-policy", ""+
		"What to do when the lease is lost: 'exit' (stop the controllers and return an error, as KCM "+
		"exits) or 'recampaign' (stop the controllers, then stand for election again).")
	fs.BoolVar(&o.EnableLeaderMigration, "enable-leader-migration", o.EnableLeaderMigration, ""+
		"Whether to enable controller leader migration.")
	fs.StringVar(&o.LeaderMigrationConfig, "leader-migration-config", o.LeaderMigrationConfig, ""+
		"Path to the config file for controller leader migration, or empty to use the value "+
		"that reflects default configuration of the controller manager. The config file should "+
		"be of type LeaderMigrationConfiguration, group controllermanager.config.k8s.io, "+
		"version v1alpha1, v1beta1 or v1.")
	o.Sharding.AddFlags(fs)
}

// policyValue parses --leader-elect-lost-lease-policy.
type policyValue struct{ p *leader.LostLeasePolicy }

func (v policyValue) String() string {
	if v.p == nil {
		return ""
	}
	return string(*v.p)
}
func (v policyValue) Type() string { return "string" }
func (v policyValue) Set(s string) error {
	switch p := leader.LostLeasePolicy(s); p {
	case leader.Exit, leader.Recampaign:
		*v.p = p
		return nil
	}
	return fmt.Errorf("%q is not a policy; use %q or %q", s, leader.Exit, leader.Recampaign)
}

// positiveDuration is a pflag.Value that rejects zero and negative durations
// while the command line is parsed.
type positiveDuration struct{ d *time.Duration }

func (p positiveDuration) String() string {
	if p.d == nil {
		return "0s"
	}
	return p.d.String()
}
func (p positiveDuration) Type() string { return "duration" }
func (p positiveDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d <= 0 {
		return errors.New("must be a positive duration such as 10s")
	}
	*p.d = d
	return nil
}

// processFlags are the flags AddFlags adds that belong to the process, not
// to one Manager: the API server and how to talk to it, the feature gates
// (one process, one gate) and logging (one process, one logger). Logging's
// flags are found by asking logging.Options for them.
var processFlags = map[string]bool{
	"kubeconfig": true, "master": true,
	"kube-api-qps": true, "kube-api-burst": true, "kube-api-content-type": true,
	"feature-gates": true,
}

// isProcessFlag reports whether AddFlags' flag name is process-wide.
func isProcessFlag(name string, logging map[string]bool) bool {
	return processFlags[name] || logging[name]
}

// loggingFlags names the flags logging.Options adds.
func loggingFlags() map[string]bool {
	var o Options
	fs := pflag.NewFlagSet("logging", pflag.ContinueOnError)
	o.Logging.AddFlags(fs)
	out := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { out[f.Name] = true })
	return out
}

// AddProcessFlags adds to fs, bound to o, the flags of AddFlags that
// belong to the process rather than to one Manager: --kubeconfig,
// --master, --kube-api-qps, --kube-api-burst, --kube-api-content-type,
// --feature-gates and the logging flags (-v, --logging-format, ...). A
// program with several Managers adds them once, from one Options, and
// gives them to the others' with ShareProcess; each Manager's own flags
// come from AddManagerFlags under a prefix of its own.
func (o *Options) AddProcessFlags(fs *pflag.FlagSet) { o.addFlagsWhere(fs, "", true) }

// AddManagerFlags adds to fs, bound to o, every flag of AddFlags that is
// not process-wide (AddProcessFlags), each named prefix followed by its
// KCM name: with prefix "ccm-", --ccm-controllers, --ccm-secure-port,
// --ccm-leader-elect. Two Managers' flags then live on one flag set side
// by side (two AddFlags on one set panic: flag redefined). An empty prefix
// adds them under their KCM names.
//
// The help texts name the other flags they mention with the same prefix
// (--ccm-tls-cert-file's says --ccm-tls-private-key-file). o remembers
// the prefix: Build's errors and warnings and the Manager's log lines name
// its flags as its user types them (--ccm-secure-port=0, not
// --secure-port=0); the process-wide flags keep their names.
func (o *Options) AddManagerFlags(fs *pflag.FlagSet, prefix string) {
	o.addFlagsWhere(fs, prefix, false)
	o.flagPrefix = prefix
}

// addFlagsWhere adds AddFlags' process-wide flags (process) or the others,
// renamed with prefix, as are the flags their help texts name.
func (o *Options) addFlagsWhere(fs *pflag.FlagSet, prefix string, process bool) {
	all := pflag.NewFlagSet("all", pflag.ContinueOnError)
	o.AddFlags(all)
	logging := loggingFlags()
	all.VisitAll(func(f *pflag.Flag) {
		if isProcessFlag(f.Name, logging) != process {
			return
		}
		g := *f
		g.Name = prefix + f.Name
		g.Usage = flagprefix.Renamer{Prefix: prefix, Names: managerFlagNames}.Help(f.Usage)
		if prefix != "" {
			g.Shorthand = "" // -v stays the process's
		}
		fs.AddFlag(&g)
	})
}
