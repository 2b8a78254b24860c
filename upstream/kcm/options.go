package kcm

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
	kcmconfig "k8s.io/kubernetes/cmd/kube-controller-manager/app/config"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	ctrlconfig "k8s.io/kubernetes/pkg/controller/apis/config"

	"github.com/ctrlhost/ctrlhost/manager"
)

// Options are kube-controller-manager's controller settings, held in
// upstream's own option groups (one per controller, plus the cluster-wide
// ones such as --cluster-cidr), so that their flags, defaults and
// validation are upstream's exactly. The host's settings (leader election,
// serving, logging, --controllers, client rate limits) are ctrlhost's
// manager.Options; AddFlags puts both under KCM's flag names.
//
// Build one with NewOptions; the zero value is not usable.
type Options struct {
	s *options.KubeControllerManagerOptions
}

// NewOptions returns upstream's defaults for every controller setting.
func NewOptions() (*Options, error) {
	s, err := options.NewKubeControllerManagerOptions()
	if err != nil {
		return nil, fmt.Errorf("kube-controller-manager defaults: %w", err)
	}
	// The host serves; upstream's serving options must never bind a port.
	s.SecureServing.BindPort = 0
	return &Options{s: s}, nil
}

// Flag sections of upstream's --help that hold only controller settings
// besides the per-controller ones (whose sections are named after their
// controller).
var controllerSections = []string{"deprecated"}

// HostSection is the --help section of host flags that kube-controller-manager
// does not have.
const HostSection = "ctrlhost"

// AddFlags fills fss with kube-controller-manager's command line, grouped in
// sections as KCM's --help groups it:
//
//   - every flag upstream's controller option groups define, bound to o;
//   - where KCM has a flag that host (manager.Options.AddFlags, already
//     called on it) also defines, host's flag, in KCM's section;
//   - every other KCM flag (say --contention-profiling), hidden, failing when
//     given with an error that names it: this binary does not implement it,
//     and silently ignoring a flag would hide a difference;
//   - host flags KCM does not have, in HostSection.
func (o *Options) AddFlags(fss *cliflag.NamedFlagSets, host *pflag.FlagSet) {
	up := o.s.Flags(app.KnownControllers(), app.ControllersDisabledByDefault(),
		app.ControllerAliases())
	passThrough := o.controllerFlags()
	controllers := app.NewControllerDescriptors()
	taken := map[string]bool{}
	for _, section := range up.Order {
		into := fss.FlagSet(section)
		up.FlagSets[section].VisitAll(func(f *pflag.Flag) {
			taken[f.Name] = true
			switch {
			case host.Lookup(f.Name) != nil:
				hf := host.Lookup(f.Name)
				if f.Name == "controllers" {
					// Upstream's help lists every controller and the
					// disabled-by-default ones; the semantics are the same.
					hf.Usage = f.Usage
				}
				into.AddFlag(hf)
			case passThrough[f.Name] || controllers[section] != nil ||
				slices.Contains(controllerSections, section):
				into.AddFlag(f)
			default:
				into.AddFlag(notImplemented(f))
			}
		})
	}
	host.VisitAll(func(f *pflag.Flag) {
		if !taken[f.Name] {
			fss.FlagSet(HostSection).AddFlag(f)
		}
	})
}

// controllerFlags names the flags outside the per-controller sections that
// configure controllers rather than the host: the cluster-wide settings of
// upstream's KubeCloudShared group (--cluster-cidr, --allocate-node-cidrs,
// --node-monitor-period, …).
func (o *Options) controllerFlags() map[string]bool {
	fs := pflag.NewFlagSet("cloud-shared", pflag.ContinueOnError)
	shared := *o.s.KubeCloudShared // bind a copy: only the names are wanted
	shared.AddFlags(fs)
	names := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
	return names
}

// notImplemented returns a hidden copy of f whose every use is an error.
func notImplemented(f *pflag.Flag) *pflag.Flag {
	c := *f
	c.Value = refused{name: f.Name, typ: f.Value.Type(), def: f.DefValue}
	c.Hidden = true
	c.Deprecated = ""
	if c.NoOptDefVal != "" {
		c.NoOptDefVal = "true"
	}
	return &c
}

// ErrFlagNotImplemented is returned (wrapped) for a kube-controller-manager
// flag that this host does not implement.
var ErrFlagNotImplemented = errors.New("is a kube-controller-manager flag that " +
	"ctrlhost does not implement")

type refused struct{ name, typ, def string }

func (r refused) String() string { return r.def }
func (r refused) Type() string   { return r.typ }
func (r refused) Set(string) error {
	return fmt.Errorf("--%s %w; remove it (ctrlhost --help lists what is implemented)", r.name,
		ErrFlagNotImplemented)
}

// Validate reports every invalid controller setting, with upstream's checks,
// given the host's settings (its --controllers and --cloud-provider take part
// in upstream's checks).
func (o *Options) Validate(host manager.Options) []error {
	var unknown []string
	known := app.NewControllerDescriptors()
	aliases := app.ControllerAliases()
	for _, entry := range host.Controllers {
		name := strings.TrimPrefix(entry, "-")
		if _, ok := known[name]; ok || name == "*" || aliases[name] != "" {
			continue
		}
		unknown = append(unknown, strconv.Quote(entry))
	}
	if len(unknown) > 0 {
		return []error{fmt.Errorf("--controllers: unknown %s; the known names and aliases are: %s",
			strings.Join(unknown, ", "), knownNames())}
	}
	o.fromHost(host)
	err := o.s.Validate(app.KnownControllers(), app.ControllersDisabledByDefault(),
		app.ControllerAliases())
	if err == nil {
		return nil
	}
	var agg interface{ Errors() []error }
	if errors.As(err, &agg) {
		return agg.Errors()
	}
	return []error{err}
}

// fromHost copies the host settings upstream's option groups also hold.
func (o *Options) fromHost(host manager.Options) {
	// The flags are parsed: settle the component registry now rather
	// than have upstream warn about a fallback. Its --feature-gates is the
	// host's, applied to the same process-wide gate when the Manager is
	// built.
	_ = o.s.ComponentGlobalsRegistry.Set()
	g := o.s.Generic
	g.Controllers = slices.Clone(host.Controllers)
	if len(g.Controllers) == 0 {
		g.Controllers = []string{"*"}
	}
	if host.MinResyncPeriod > 0 {
		g.MinResyncPeriod.Duration = host.MinResyncPeriod
	}
	if host.ControllerStartInterval > 0 {
		g.ControllerStartInterval.Duration = host.ControllerStartInterval
	}
	g.LeaderElection.LeaderElect = host.LeaderElect
	if host.KubeAPIQPS > 0 {
		g.ClientConnection.QPS = host.KubeAPIQPS
	}
	if host.KubeAPIBurst > 0 {
		g.ClientConnection.Burst = host.KubeAPIBurst
	}
	if host.KubeAPIContentType != "" {
		g.ClientConnection.ContentType = host.KubeAPIContentType
	}
	o.s.KubeCloudShared.UseServiceAccountCredentials = host.UseServiceAccountCredentials
	o.s.KubeCloudShared.CloudProvider.Name = host.CloudProvider
	o.s.KubeCloudShared.CloudProvider.CloudConfigFile = host.CloudConfig
}

// Config returns the KubeControllerManagerConfiguration upstream's
// controllers read, from o and the host's settings. Call Validate first.
func (o *Options) Config(
	host manager.Options,
) (*ctrlconfig.KubeControllerManagerConfiguration, error) {
	o.fromHost(host)
	var c kcmconfig.Config
	if err := o.s.ApplyTo(&c, app.KnownControllers(), app.ControllersDisabledByDefault(),
		app.ControllerAliases()); err != nil {
		return nil, fmt.Errorf("kube-controller-manager configuration: %w", err)
	}
	if c.SecureServing != nil {
		return nil, errors.New("kube-controller-manager configuration: upstream serving was " +
			"configured; the host serves")
	}
	cfg := c.ComponentConfig
	return &cfg, nil
}

// knownNames lists every canonical name and alias, sorted, for errors.
func knownNames() string {
	var names []string
	for name, d := range app.NewControllerDescriptors() {
		names = append(names, name)
		names = append(names, d.GetAliases()...)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
