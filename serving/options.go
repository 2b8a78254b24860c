package serving

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Options configures a Server. The zero value is usable: every zero field
// takes the default its comment states. Defaulting happens in one place,
// WithDefaults, which returns a copy.
//
// AddFlags binds the fields under kube-controller-manager's flag names, so
// a KCM command line keeps working; the deviations from KCM's defaults are
// stated on the fields.
type Options struct {
	// BindAddress is the IP address to listen on; "0.0.0.0" or "::" listen
	// on every interface. Default: "127.0.0.1". KCM listens on every
	// interface by default; ctrlhost keeps loopback so that a library user
	// exposes the endpoints to the network only by asking for it.
	BindAddress string
	// SecurePort is the port to serve HTTPS on: 1-65535; 0 (or
	// PortDisabled) turns serving off; PortEphemeral serves on a free port
	// the kernel picks (Listen returns the address), for tests.
	//
	// One rule in Go and on the command line: 0 is off, as KCM's
	// --secure-port=0. The zero Options therefore serve nothing, so that
	// two Managers in one test never collide on a fixed port (mount
	// Manager.Handler on a server of your own, or ask for PortEphemeral);
	// NewOptions, which programs bind to flags, sets DefaultSecurePort
	// (10257), KCM's default.
	SecurePort int

	// CertFile is the PEM file of the serving certificate, followed by any
	// intermediates; KeyFile is the PEM file of its private key. Set both or
	// neither. Neither: a self-signed ECDSA certificate for localhost,
	// 127.0.0.1, ::1 and BindAddress is generated in memory by New, as KCM
	// does without --tls-cert-file.
	CertFile string
	KeyFile  string
	// CertDir is where the self-signed pair is kept when CertFile is not
	// set: <CertDir>/<PairName>.crt and .key are used when present and
	// written (key 0600) when not, so that the certificate outlives a
	// restart. Default: "", generated in memory each start, as KCM.
	CertDir string
	// PairName names the files in CertDir. Default: "ctrlhost"; the
	// Manager sets its component name (KCM: kube-controller-manager).
	PairName string
	// TLSMinVersion is the lowest TLS version served, by name
	// (VersionTLS12, VersionTLS13). Default: VersionTLS12; lower versions
	// are refused.
	TLSMinVersion string
	// TLSCipherSuites are the cipher suites offered for TLS 1.2, by the
	// names crypto/tls and KCM use. Default: Go's.
	TLSCipherSuites []string
	// PermitAddressSharing binds with SO_REUSEADDR, so that a restarted
	// process can bind while connections of the old one linger. Default:
	// false.
	PermitAddressSharing bool

	// ClientCAFile is a PEM bundle of CAs: a request with a client
	// certificate one of them signs is authenticated as the certificate's
	// common name, with its organizations as groups. Default: "", looked
	// up in the cluster (SkipLookup).
	ClientCAFile string
	// RequestHeader configures front-proxy authentication.
	RequestHeader RequestHeaderOptions
	// SkipLookup, when false, reads what ClientCAFile and
	// RequestHeader.ClientCAFile leave unset from the API server's
	// kube-system/extension-apiserver-authentication ConfigMap, once, when
	// the Server binds its port (Listen), as KCM does at start. Default:
	// false.
	SkipLookup bool
	// TolerateLookupFailure turns a failed lookup (say, no RBAC to read
	// the ConfigMap) into a logged warning instead of an error; requests
	// can then only authenticate with bearer tokens. Default: false.
	TolerateLookupFailure bool

	// DisableAuth serves every path to anyone, without authentication or
	// authorization (still over TLS). For development only. KCM has no such
	// switch. Default: false.
	DisableAuth bool
	// AuthenticationKubeconfig is a kubeconfig file for creating
	// TokenReviews. Default: "", use the client given to New.
	AuthenticationKubeconfig string
	// AuthorizationKubeconfig is a kubeconfig file for creating
	// SubjectAccessReviews. Default: "", use the client given to New.
	AuthorizationKubeconfig string
	// AlwaysAllowPaths are served without authentication or authorization.
	// Each entry is a path ("/healthz") or a prefix ending in "*"
	// ("/healthz/*"); a leading "/" is optional. Default:
	// DefaultAlwaysAllowPaths, which adds the sub-paths to KCM's
	// "/healthz,/readyz,/livez" so that /readyz/<check> is open too. An
	// empty non-nil slice opens nothing.
	AlwaysAllowPaths []string
	// AlwaysAllowGroups are allowed every path once authenticated, without
	// a SubjectAccessReview; there is no flag, as in KCM. Default:
	// ["system:masters"]. An empty non-nil slice allows no group this way.
	AlwaysAllowGroups []string
	// TokenCacheTTL is how long a TokenReview answer (authenticated or not)
	// is cached. Default: 10s. A negative value disables the cache; on the
	// command line 0 does that.
	TokenCacheTTL time.Duration
	// AuthorizedCacheTTL and UnauthorizedCacheTTL are how long an allowing
	// and a denying SubjectAccessReview answer is cached. Default: 10s
	// each. A negative value disables caching; on the command line 0 does.
	AuthorizedCacheTTL   time.Duration
	UnauthorizedCacheTTL time.Duration

	// Profiling serves /debug/pprof/ (authorized like any other path).
	// Default: false. KCM's --profiling defaults to true; ctrlhost leaves
	// profiling off unless asked for.
	Profiling bool

	// ShutdownTimeout bounds the graceful shutdown at the end of Serve;
	// after it, connections are closed. Default: 5s. No flag.
	ShutdownTimeout time.Duration
}

// Values of SecurePort that are not port numbers.
const (
	// PortDisabled turns serving off, as 0 does: New loads no certificate
	// and no auth kubeconfig, Listen and Serve do nothing.
	PortDisabled = -1
	// PortEphemeral serves on a free port the kernel picks when Listen
	// binds; Listen (and manager.Manager.ServingAddr) return it. For tests,
	// which then never race for a port; there is no flag for it.
	PortEphemeral = -2
)

// Defaults.
const (
	DefaultBindAddress     = "127.0.0.1"
	DefaultSecurePort      = 10257
	DefaultCacheTTL        = 10 * time.Second
	DefaultShutdownTimeout = 5 * time.Second
	DefaultPairName        = "ctrlhost"
	DefaultTLSMinVersion   = "VersionTLS12"
)

// DefaultAlwaysAllowPaths are the paths served without credentials by
// default: the health endpoints and their per-check sub-paths.
var DefaultAlwaysAllowPaths = []string{
	"/healthz",
	"/healthz/*",
	"/readyz",
	"/readyz/*",
	"/livez",
	"/livez/*",
}

// DefaultAlwaysAllowGroups are the groups allowed every path by default.
var DefaultAlwaysAllowGroups = []string{"system:masters"}

// NewOptions returns Options with every default filled in, ready for
// AddFlags.
func NewOptions() Options { return Options{SecurePort: DefaultSecurePort}.WithDefaults() }

// WithDefaults returns a copy of o with every zero field set to its
// default. Slices are copied.
func (o Options) WithDefaults() Options {
	if o.BindAddress == "" {
		o.BindAddress = DefaultBindAddress
	}
	o.AlwaysAllowPaths = copyOr(o.AlwaysAllowPaths, DefaultAlwaysAllowPaths)
	o.AlwaysAllowGroups = copyOr(o.AlwaysAllowGroups, DefaultAlwaysAllowGroups)
	if o.TokenCacheTTL == 0 {
		o.TokenCacheTTL = DefaultCacheTTL
	}
	if o.AuthorizedCacheTTL == 0 {
		o.AuthorizedCacheTTL = DefaultCacheTTL
	}
	if o.UnauthorizedCacheTTL == 0 {
		o.UnauthorizedCacheTTL = DefaultCacheTTL
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	if o.PairName == "" {
		o.PairName = DefaultPairName
	}
	if o.TLSMinVersion == "" {
		o.TLSMinVersion = DefaultTLSMinVersion
	}
	o.TLSCipherSuites = slices.Clone(o.TLSCipherSuites)
	o.RequestHeader = o.RequestHeader.withDefaults()
	return o
}

// copyOr returns a copy of s, or of def when s is nil.
func copyOr(s, def []string) []string {
	if s == nil {
		s = def
	}
	return append(make([]string, 0, len(s)), s...)
}

// Enabled reports whether o serves at all (SecurePort not 0 or PortDisabled).
func (o Options) Enabled() bool {
	p := o.WithDefaults().SecurePort
	return p > 0 || p == PortEphemeral
}

// listenPort is the port number Listen binds: 0 asks the kernel for one.
func (o Options) listenPort() int {
	if o.SecurePort == PortEphemeral {
		return 0
	}
	return o.SecurePort
}

// Validate reports every invalid field of o (after defaulting), each error
// naming its flag.
func (o Options) Validate() []error {
	o = o.WithDefaults()
	var errs []error
	if net.ParseIP(o.BindAddress) == nil {
		errs = append(errs, fmt.Errorf("--bind-address: %q is not an IP address", o.BindAddress))
	}
	if p := o.SecurePort; p > 65535 || (p < 0 && p != PortDisabled && p != PortEphemeral) {
		errs = append(
			errs,
			fmt.Errorf("--secure-port: %d is not a port; use 1-65535, or 0 to disable serving "+
				"(in Go, SecurePort: 1-65535, serving.PortDisabled or serving.PortEphemeral)", p),
		)
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		errs = append(
			errs,
			errors.New("--tls-cert-file and --tls-private-key-file: set both or neither"),
		)
	}
	if _, err := newPathMatcher(o.AlwaysAllowPaths); err != nil {
		errs = append(errs, fmt.Errorf("--authorization-always-allow-paths: %w", err))
	}
	if v, err := tlsVersion(o.TLSMinVersion); err != nil {
		errs = append(
			errs,
			fmt.Errorf(
				"--tls-min-version: %w; use one of %s",
				err,
				strings.Join(versionNames(), ", "),
			),
		)
	} else if v < tls.VersionTLS12 {
		errs = append(errs, fmt.Errorf("--tls-min-version: %s is below TLS 1.2, which ctrlhost always "+
			"requires; use VersionTLS12 or VersionTLS13", o.TLSMinVersion))
	}
	if _, err := cipherSuites(o.TLSCipherSuites); err != nil {
		errs = append(
			errs,
			fmt.Errorf(
				"--tls-cipher-suites: %w; use names from: %s",
				err,
				strings.Join(preferredCipherNames(), ", "),
			),
		)
	}
	if o.CertFile != "" && o.CertDir != "" {
		errs = append(
			errs,
			errors.New("--cert-dir is ignored when --tls-cert-file is set; set one of them"),
		)
	}
	if o.ShutdownTimeout < 0 {
		errs = append(
			errs,
			fmt.Errorf("ShutdownTimeout: must not be negative, got %v", o.ShutdownTimeout),
		)
	}
	return errs
}

// AddFlags binds o's fields to fs under KCM's flag names, with o's current
// values (defaulted first) as the defaults shown in help.
//
// --bind-address and --secure-port are also bound by manager.Options; bind
// them from one of the two only.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	*o = o.WithDefaults()
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress, ""+
		"The IP address on which to listen for the --secure-port port. 0.0.0.0 or :: "+
		"listen on every interface.")
	fs.Var(
		portValue{&o.SecurePort},
		"secure-port",
		"The port on which to serve HTTPS with authentication and authorization. If 0, "+
			"don't serve HTTPS at all.",
	)
	fs.StringVar(&o.CertFile, "tls-cert-file", o.CertFile, ""+
		"File containing the default x509 Certificate for HTTPS (CA cert, if any, concatenated after "+
		"server cert). If --tls-cert-file and --tls-private-key-file are not provided, a self-signed "+
		"certificate and key are generated in memory for localhost and the bind address.")
	fs.StringVar(&o.KeyFile, "tls-private-key-file", o.KeyFile,
		"File containing the default x509 private key matching --tls-cert-file.")
	fs.StringVar(&o.CertDir, "cert-dir", o.CertDir, ""+
		"The directory where the TLS certs are located. If --tls-cert-file and --tls-private-key-file "+
		"are provided, this flag will be ignored.")
	fs.StringVar(&o.TLSMinVersion, "tls-min-version", o.TLSMinVersion, ""+
		"Minimum TLS version supported. Possible values: VersionTLS12, VersionTLS13 "+
		"(ctrlhost refuses lower versions).")
	fs.StringSliceVar(&o.TLSCipherSuites, "tls-cipher-suites", o.TLSCipherSuites, ""+
		"Comma-separated list of cipher suites for the server. If omitted, the default Go "+
		"cipher suites will be used.\n"+
		"Preferred values: "+strings.Join(preferredCipherNames(), ", ")+".\n"+
		"Insecure values: "+strings.Join(insecureCipherNames(), ", ")+".")
	fs.BoolVar(&o.PermitAddressSharing, "permit-address-sharing", o.PermitAddressSharing, ""+
		"If true, SO_REUSEADDR will be used when binding the port. This allows binding to wildcard IPs "+
		"like 0.0.0.0 and specific IPs in parallel, and it avoids waiting for the kernel to release "+
		"sockets in TIME_WAIT state.")
	fs.StringVar(&o.ClientCAFile, "client-ca-file", o.ClientCAFile, ""+
		"If set, any request presenting a client certificate signed by one of the authorities "+
		"in the client-ca-file is authenticated with an identity corresponding to the "+
		"CommonName of the client certificate.")
	fs.StringVar(
		&o.RequestHeader.ClientCAFile,
		"requestheader-client-ca-file",
		o.RequestHeader.ClientCAFile,
		""+
			"Root certificate bundle to use to verify client certificates on incoming requests before "+
			"trusting usernames in headers specified by --requestheader-username-headers. WARNING: "+
			"generally do not depend on authorization being already done for incoming requests.",
	)
	fs.StringSliceVar(
		&o.RequestHeader.AllowedNames,
		"requestheader-allowed-names",
		o.RequestHeader.AllowedNames,
		""+
			"List of client certificate common names to allow to provide usernames in headers specified "+
			"by --requestheader-username-headers. If empty, any client certificate validated by the "+
			"authorities in --requestheader-client-ca-file is allowed.",
	)
	fs.StringSliceVar(
		&o.RequestHeader.UsernameHeaders,
		"requestheader-username-headers",
		o.RequestHeader.UsernameHeaders,
		""+
			"List of request headers to inspect for usernames. X-Remote-User is common.",
	)
	fs.StringSliceVar(
		&o.RequestHeader.UIDHeaders,
		"requestheader-uid-headers",
		o.RequestHeader.UIDHeaders,
		""+
			"List of request headers to inspect for UIDs. X-Remote-Uid is suggested.",
	)
	fs.StringSliceVar(
		&o.RequestHeader.GroupHeaders,
		"requestheader-group-headers",
		o.RequestHeader.GroupHeaders,
		""+
			"List of request headers to inspect for groups. X-Remote-Group is suggested.",
	)
	fs.StringSliceVar(
		&o.RequestHeader.ExtraHeaderPrefixes,
		"requestheader-extra-headers-prefix",
		o.RequestHeader.ExtraHeaderPrefixes,
		""+
			"List of request header prefixes to inspect. X-Remote-Extra- is suggested.",
	)
	fs.BoolVar(&o.SkipLookup, "authentication-skip-lookup", o.SkipLookup, ""+
		"If false, the authentication-kubeconfig will be used to lookup missing authentication "+
		"configuration from the cluster.")
	fs.BoolVar(
		&o.TolerateLookupFailure,
		"authentication-tolerate-lookup-failure",
		o.TolerateLookupFailure,
		""+
			"If true, failures to look up missing authentication configuration from the cluster "+
			"are not considered fatal. Note that this can result in authentication that treats "+
			"all requests as anonymous.",
	)
	fs.BoolVar(&o.DisableAuth, "disable-serving-auth", o.DisableAuth, ""+
		"If true, serve every endpoint without authentication or authorization (still over "+
		"TLS). For development only.")
	fs.StringVar(
		&o.AuthenticationKubeconfig,
		"authentication-kubeconfig",
		o.AuthenticationKubeconfig,
		""+
			"kubeconfig file pointing at the 'core' kubernetes server with enough rights to create "+
			"tokenreviews.authentication.k8s.io. If empty, the controller host's own client is used.",
	)
	fs.StringVar(
		&o.AuthorizationKubeconfig,
		"authorization-kubeconfig",
		o.AuthorizationKubeconfig,
		""+
			"kubeconfig file pointing at the 'core' kubernetes server with enough rights to create "+
			"subjectaccessreviews.authorization.k8s.io. If empty, the controller host's own client is used.",
	)
	fs.StringSliceVar(
		&o.AlwaysAllowPaths,
		"authorization-always-allow-paths",
		o.AlwaysAllowPaths,
		""+
			"A list of HTTP paths served without authentication or authorization. An entry "+
			"ending in '*' is a prefix.",
	)
	fs.Var(
		ttlValue{&o.TokenCacheTTL},
		"authentication-token-webhook-cache-ttl",
		"The duration to cache responses from the webhook token authenticator. 0 disables the cache.",
	)
	fs.Var(
		ttlValue{&o.AuthorizedCacheTTL},
		"authorization-webhook-cache-authorized-ttl",
		"The duration to cache 'authorized' responses from the webhook authorizer. 0 disables the cache.",
	)
	fs.Var(
		ttlValue{&o.UnauthorizedCacheTTL},
		"authorization-webhook-cache-unauthorized-ttl",
		"The duration to cache 'unauthorized' responses from the webhook "+
			"authorizer. 0 disables the cache.",
	)
	fs.BoolVar(
		&o.Profiling,
		"profiling",
		o.Profiling,
		"Enable profiling via web interface host:port/debug/pprof/ (authorized like any other path).",
	)
}

// portValue parses --secure-port: 1-65535, or 0 to disable serving.
type portValue struct{ p *int }

func (v portValue) String() string {
	switch {
	case v.p == nil || *v.p == PortDisabled:
		return "0"
	case *v.p == PortEphemeral:
		return "ephemeral" // set in Go; no flag value means it
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
	*v.p = n
	return nil
}

// ttlValue maps "0 disables the cache" onto a negative TTL, since a zero
// TTL means "default".
type ttlValue struct{ d *time.Duration }

func (v ttlValue) String() string {
	if v.d == nil || *v.d < 0 {
		return "0s"
	}
	return v.d.String()
}
func (v ttlValue) Type() string { return "duration" }
func (v ttlValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d < 0 {
		return errors.New("must not be negative; use 0 to disable the cache")
	}
	if d == 0 {
		d = -1
	}
	*v.d = d
	return nil
}
