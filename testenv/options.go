package testenv

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ctrlhost/ctrlhost/internal/testbin"
)

const (
	// KubernetesVersion is the kube-apiserver version this package expects
	// by default: the newest minor of the tested window, the one make test
	// starts. Options.KubernetesVersion names another (make matrix).
	KubernetesVersion = "v1.37.1"

	// EnvKubernetesVersion names the environment variable that sets the
	// default of Options.KubernetesVersion, so that a whole test suite
	// runs against an older minor of the window without a code change
	// (make matrix sets it, with EnvTestBin).
	EnvKubernetesVersion = "CTRLHOST_KUBERNETES_VERSION"

	// BuildHint is the command that builds the binaries Start needs, run
	// in the ctrlhost repository.
	BuildHint = "make testbin"

	// DownstreamBuildHint is the command that builds them from any other
	// module, into the per-user cache directory where Start finds them.
	DownstreamBuildHint = "go run github.com/ctrlhost/ctrlhost/cmd/testbin@<ctrlhost version>"

	// EnvTestBin names the environment variable that points at a directory
	// holding the etcd and kube-apiserver binaries.
	EnvTestBin = testbin.EnvTestBin

	// EnvKubebuilderAssets is controller-runtime envtest's variable for the
	// same purpose; it is honoured so that existing setups keep working.
	EnvKubebuilderAssets = "KUBEBUILDER_ASSETS"

	// AuthorizationRBAC makes the API server authorize requests with RBAC.
	AuthorizationRBAC = "RBAC"
	// AuthorizationAlwaysAllow makes the API server allow every
	// authenticated request.
	AuthorizationAlwaysAllow = "AlwaysAllow"

	// AdminUser is the name of the administrator the Env authenticates as in
	// Config; it is a member of system:masters.
	AdminUser = "testenv-admin"

	// ServiceAccountIssuer is the issuer of service account tokens, and the
	// audience the API server accepts.
	ServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

	// ServiceClusterIPRange is the range Services get their cluster IPs from.
	ServiceClusterIPRange = "10.0.0.0/24"

	defaultStartTimeout = 60 * time.Second
)

// Options configures Start. The zero value is ready to use.
type Options struct {
	// BinDir is the directory holding the etcd and kube-apiserver binaries.
	// Default: $CTRLHOST_TESTBIN if set, else $KUBEBUILDER_ASSETS if set,
	// else <module root>/_output/testbin/<Options.KubernetesVersion> if it exists,
	// where the module root is found by walking up from the working
	// directory to the go.mod of module github.com/ctrlhost/ctrlhost, else
	// the per-user cache directory that cmd/testbin builds into,
	// <os.UserCacheDir()>/ctrlhost/testbin/<Options.KubernetesVersion> (see
	// testbin.CacheDir). A relative path is taken relative to the working
	// directory.
	BinDir string

	// KubernetesVersion is the version kube-apiserver must report (unless
	// SkipVersionCheck), which also names the default binary directories:
	// one of the tested window, such as "v1.34.4" (docs/versioning.md;
	// `go run github.com/ctrlhost/ctrlhost/cmd/testbin -minor 1.34` builds
	// it). Default: $CTRLHOST_KUBERNETES_VERSION if set, else
	// KubernetesVersion.
	KubernetesVersion string

	// SkipVersionCheck turns off the check that "kube-apiserver --version"
	// reports Options.KubernetesVersion. Default: false, the check runs, except when
	// the directory came from $KUBEBUILDER_ASSETS, whose binaries are
	// controller-runtime's and of whatever version its tooling installed.
	SkipVersionCheck bool

	// ExtraAPIServerFlags are appended to the kube-apiserver command line,
	// after the flags testenv sets, so a repeated single-valued flag here
	// wins. Each entry is one argument, e.g. "--v=4". Default: none.
	ExtraAPIServerFlags []string

	// FeatureGates are kube-apiserver feature gates to set, passed as one
	// --feature-gates flag in name order before ExtraAPIServerFlags, e.g.
	// {"ShardedListAndWatch": true}. kube-apiserver refuses a gate it does
	// not know, and Start reports its log. Default: none (its defaults).
	FeatureGates map[string]bool

	// Authorization is the API server's authorization mode:
	// AuthorizationRBAC or AuthorizationAlwaysAllow. Default: RBAC.
	Authorization string

	// Users are extra users, each with a generated static bearer token; see
	// Env.UserConfig and Env.Token. Default: none.
	Users []User

	// CRDPaths are YAML or JSON files of CustomResourceDefinitions, or
	// directories of them, that Start installs once the API server is
	// ready, as Env.InstallCRDFiles does; Start returns when every CRD is
	// established and served, and fails if one is not. The files are read
	// and checked before anything is started. A relative path is taken
	// relative to the working directory. Default: none.
	CRDPaths []string

	// StartTimeout bounds the whole of Start, including waiting for both
	// processes to become ready and installing CRDPaths. Default: 60s.
	StartTimeout time.Duration

	// Logf, when set, receives progress messages (ports, readiness, retries,
	// shutdown), e.g. t.Logf. It must stay callable until Stop returns.
	// Default: discard.
	Logf func(format string, args ...any)

	// pickPorts replaces freePorts in tests of the port retry.
	pickPorts func(n int) ([]int, error)
}

// User is an extra identity known to the API server. Its token is generated
// by Start.
type User struct {
	// Name is the user name; required, unique, and not AdminUser.
	Name string
	// Groups the user belongs to, in addition to system:authenticated which
	// the API server adds itself. Group names must not contain commas.
	Groups []string
	// UID is reported as the user's UID. Default: empty.
	UID string
}

// kubernetesVersion is KubernetesVersion's default applied.
func (o Options) kubernetesVersion() string {
	switch {
	case o.KubernetesVersion != "":
		return o.KubernetesVersion
	case os.Getenv(EnvKubernetesVersion) != "":
		return os.Getenv(EnvKubernetesVersion)
	}
	return KubernetesVersion
}

// withDefaults returns a copy of o with every unset field defaulted. It does
// not resolve BinDir; BinaryPaths does that.
func (o Options) withDefaults() Options {
	if o.Authorization == "" {
		o.Authorization = AuthorizationRBAC
	}
	o.KubernetesVersion = o.kubernetesVersion()
	if o.StartTimeout == 0 {
		o.StartTimeout = defaultStartTimeout
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	o.ExtraAPIServerFlags = append([]string(nil), o.ExtraAPIServerFlags...)
	o.CRDPaths = append([]string(nil), o.CRDPaths...)
	o.FeatureGates = maps.Clone(o.FeatureGates)
	users := make([]User, len(o.Users))
	for i, u := range o.Users {
		u.Groups = append([]string(nil), u.Groups...)
		users[i] = u
	}
	o.Users = users
	return o
}

// featureGatesFlag is the --feature-gates argument of o.FeatureGates, or
// "" when there are none.
func (o Options) featureGatesFlag() string {
	if len(o.FeatureGates) == 0 {
		return ""
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(o.FeatureGates)) {
		parts = append(parts, fmt.Sprintf("%s=%t", name, o.FeatureGates[name]))
	}
	return "--feature-gates=" + strings.Join(parts, ",")
}

// validate reports every invalid field of a defaulted Options at once.
func (o Options) validate() error {
	var errs []error
	switch o.Authorization {
	case AuthorizationRBAC, AuthorizationAlwaysAllow:
	default:
		errs = append(errs, fmt.Errorf("testenv: Authorization must be %q or %q, got %q",
			AuthorizationRBAC, AuthorizationAlwaysAllow, o.Authorization))
	}
	if o.StartTimeout < 0 {
		errs = append(errs, fmt.Errorf("testenv: StartTimeout must not be negative, got %v",
			o.StartTimeout))
	}
	seen := map[string]bool{}
	for i, u := range o.Users {
		switch {
		case u.Name == "":
			errs = append(errs, fmt.Errorf("testenv: Users[%d].Name must not be empty", i))
		case u.Name == AdminUser:
			errs = append(errs, fmt.Errorf("testenv: Users[%d].Name %q is reserved for the administrator",
				i, u.Name))
		case seen[u.Name]:
			errs = append(errs, fmt.Errorf("testenv: Users[%d].Name %q is a duplicate", i, u.Name))
		}
		seen[u.Name] = true
		for j, g := range u.Groups {
			if g == "" || strings.ContainsAny(g, ",\r\n") {
				errs = append(errs, fmt.Errorf("testenv: Users[%d].Groups[%d] %q must be non-empty and "+
					"contain no comma or newline", i, j, g))
			}
		}
		if strings.ContainsAny(u.Name, "\r\n") || strings.ContainsAny(u.UID, "\r\n") {
			errs = append(errs, fmt.Errorf("testenv: Users[%d] name and UID must not contain newlines", i))
		}
	}
	return errors.Join(errs...)
}
