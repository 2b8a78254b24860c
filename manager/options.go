package manager

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Options configures a Manager. The zero value is usable: every zero field
// takes the default its comment states, which is also KCM's. Defaulting
// happens in one place, WithDefaults, which returns a copy.
//
// Bind the fields to a command line with AddFlags; the flag names are
// kube-controller-manager's, so a KCM command line keeps working.
type Options struct {
	// Controllers selects controllers, as --controllers: "*" enables every
	// controller that is not disabled by default, "name" enables one, "-name"
	// disables one; the first entry that names a controller wins. Aliases
	// are accepted. Default: ["*"]. An empty non-nil slice enables nothing.
	Controllers []string

	// ControllerStartInterval spreads controller starts: each controller
	// waits a random time in [0, 2·interval) before Run. Default: 0.
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

	// CloudProvider is the --cloud-provider name. Descriptors marked
	// CloudProvider() run only when it is set and is not "external", KCM's
	// rule for including cloud loops. Default: "" (cloud loops skipped).
	CloudProvider string

	// BindAddress is the address the health, debug and metrics endpoints
	// are served on. Default: "127.0.0.1" (KCM listens on all interfaces;
	// ctrlhost serves plain HTTP for now, so it stays on loopback unless
	// told otherwise).
	BindAddress string
	// SecurePort is the port of those endpoints. Default: 10257. A negative
	// value disables serving; on the command line --secure-port=0 does that,
	// as in KCM.
	SecurePort int
}

// Defaults, as kube-controller-manager has them.
const (
	DefaultControllerShutdownTimeout = 10 * time.Second
	DefaultMinResyncPeriod           = 12 * time.Hour
	DefaultKubeAPIQPS                = 20
	DefaultKubeAPIBurst              = 30
	DefaultKubeAPIContentType        = "application/vnd.kubernetes.protobuf"
	DefaultBindAddress               = "127.0.0.1"
	DefaultSecurePort                = 10257
)

// NewOptions returns Options with every default filled in, ready for
// AddFlags.
func NewOptions() Options { return Options{}.WithDefaults() }

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
	if o.BindAddress == "" {
		o.BindAddress = DefaultBindAddress
	}
	if o.SecurePort == 0 {
		o.SecurePort = DefaultSecurePort
	}
	return o
}

// validate reports every invalid field of defaulted options.
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
	if o.KubeAPIQPS < 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps: must not be negative, got %v", o.KubeAPIQPS))
	}
	if o.KubeAPIBurst < 0 {
		errs = append(errs, fmt.Errorf("--kube-api-burst: must not be negative, got %d", o.KubeAPIBurst))
	}
	if o.SecurePort > 65535 {
		errs = append(errs, fmt.Errorf("--secure-port: %d is not a port; use 1-65535, or 0 to disable serving", o.SecurePort))
	}
	for i, c := range o.Controllers {
		if strings.TrimSpace(c) == "" || c == "-" {
			errs = append(errs, fmt.Errorf("--controllers: entry #%d is empty; use a controller name, -name or *", i+1))
		}
	}
	return errs
}

// AddFlags binds o's fields to fs under KCM's flag names, with o's current
// values as the defaults shown in help. Durations that must be positive and
// ports are checked as the flags are parsed.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	*o = o.WithDefaults()
	fs.StringSliceVar(&o.Controllers, "controllers", o.Controllers, ""+
		"A list of controllers to enable. '*' enables all on-by-default controllers, 'foo' enables the controller "+
		"named 'foo', '-foo' disables the controller named 'foo'. The first entry that names a controller wins.")
	fs.DurationVar(&o.ControllerStartInterval, "controller-start-interval", o.ControllerStartInterval,
		"Interval between starting controller managers; each controller waits a random time up to twice this before it runs.")
	fs.Var(positiveDuration{&o.ControllerShutdownTimeout}, "controller-shutdown-timeout",
		"Time to wait for the controllers to shut down before terminating the executable.")
	fs.Var(positiveDuration{&o.MinResyncPeriod}, "min-resync-period",
		"The resync period in reflectors will be random between MinResyncPeriod and 2*MinResyncPeriod.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig,
		"Path to kubeconfig file with authorization and master location information.")
	fs.StringVar(&o.Master, "master", o.Master,
		"The address of the Kubernetes API server (overrides any value in kubeconfig).")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "QPS to use while talking with kubernetes apiserver.")
	fs.Int32Var(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst to use while talking with kubernetes apiserver.")
	fs.StringVar(&o.KubeAPIContentType, "kube-api-content-type", o.KubeAPIContentType, "Content type of requests sent to apiserver.")
	fs.StringVar(&o.CloudProvider, "cloud-provider", o.CloudProvider,
		"The provider for cloud services. Empty or 'external' leaves controllers marked as cloud loops off.")
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress,
		"The IP address on which to listen for the --secure-port port.")
	fs.Var(portValue{&o.SecurePort}, "secure-port",
		"The port on which to serve health, debug and metrics endpoints. If 0, don't serve at all.")
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

// portValue maps KCM's "--secure-port=0 disables serving" onto SecurePort's
// negative value, since a zero SecurePort means "default".
type portValue struct{ p *int }

func (v portValue) String() string {
	if v.p == nil || *v.p < 0 {
		return "0"
	}
	return strconv.Itoa(*v.p)
}
func (v portValue) Type() string { return "int" }
func (v portValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("not a port number: %q", s)
	}
	if n < 0 || n > 65535 {
		return fmt.Errorf("%d is not a port; use 1-65535, or 0 to disable serving", n)
	}
	if n == 0 {
		n = -1
	}
	*v.p = n
	return nil
}
