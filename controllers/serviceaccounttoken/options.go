package serviceaccounttoken

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/sharedflag"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "serviceaccount-token-controller"
	Alias = "serviceaccount-token"
)

// defaultConcurrentSATokenSyncs is KCM's default worker count.
const defaultConcurrentSATokenSyncs = 5

// defaultMaxRetries is how many times KCM retries a key before it drops it.
const defaultMaxRetries = 10

// clientName is the name KCM gives the token controller's client (its user
// agent ends in it).
const clientName = "tokens-controller"

// Options configures the controller. Use NewOptions for KCM's defaults.
type Options struct {
	// ServiceAccountKeyFile is --service-account-private-key-file: a PEM
	// file holding the RSA or ECDSA private key that signs the tokens.
	// Default: "" (the controller does not start, as in KCM).
	ServiceAccountKeyFile string

	// RootCAFile is --root-ca-file: a PEM CA bundle written to each token
	// secret's ca.crt. Default: "" (the CA data of the controller's client
	// configuration, as in KCM). The flag is shared with the root-CA
	// publisher.
	RootCAFile string

	// ConcurrentSATokenSyncs is --concurrent-serviceaccount-token-syncs:
	// how many ServiceAccounts and how many Secrets are synced at once.
	// Zero means the default, 5 (as KCM's configuration defaulting does);
	// negative is invalid.
	ConcurrentSATokenSyncs int32

	// MaxRetries is how many times a failing key is retried before it is
	// dropped. Not a flag. Zero means the default, 10 (KCM's); negative is
	// invalid.
	MaxRetries int
}

// NewOptions returns KCM's defaults.
func NewOptions() Options {
	return Options{
		ConcurrentSATokenSyncs: defaultConcurrentSATokenSyncs,
		MaxRetries:             defaultMaxRetries,
	}
}

// AddFlags binds KCM's flags of this controller to o, with KCM's names and
// help and o's current values as defaults. --root-ca-file is KCM's one flag
// read by this controller and the root-CA publisher: whichever AddFlags runs
// first registers it and the value reaches both.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(
		&o.ServiceAccountKeyFile,
		"service-account-private-key-file",
		o.ServiceAccountKeyFile,
		"Enables legacy secret-based tokens when set. Filename containing a PEM-encoded private RSA or "+
			"ECDSA key used to sign service account tokens.",
	)
	fs.Int32Var(
		&o.ConcurrentSATokenSyncs,
		"concurrent-serviceaccount-token-syncs",
		o.ConcurrentSATokenSyncs,
		"The number of service account token objects that are allowed to sync concurrently. Larger "+
			"number = more responsive token generation, but more CPU (and network) load",
	)
	sharedflag.String(
		fs,
		&o.RootCAFile,
		"root-ca-file",
		"If set, this root certificate authority will be included in service account's token secret. "+
			"This must be a valid PEM-encoded CA bundle.",
	)
}

func (o Options) withDefaults() Options {
	if o.ConcurrentSATokenSyncs == 0 {
		o.ConcurrentSATokenSyncs = defaultConcurrentSATokenSyncs
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = defaultMaxRetries
	}
	return o
}

// Validate reports every invalid field. It reads the key file and the root
// CA file, when set, to check that they parse.
func (o Options) Validate() error {
	var errs []error
	if o.ConcurrentSATokenSyncs < 0 {
		errs = append(
			errs,
			fmt.Errorf(
				"--concurrent-serviceaccount-token-syncs: must be at least 1, got %d",
				o.ConcurrentSATokenSyncs,
			),
		)
	}
	if o.MaxRetries < 0 {
		errs = append(errs, fmt.Errorf("MaxRetries: must be at least 1, got %d", o.MaxRetries))
	}
	if o.ServiceAccountKeyFile != "" {
		if _, err := readKey(o.ServiceAccountKeyFile); err != nil {
			errs = append(errs, err)
		}
	}
	if o.RootCAFile != "" {
		if _, err := readCA(o.RootCAFile); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// readKey reads the signing key and builds its signer, so that a key of a
// kind KCM cannot sign with is reported as early as one that does not parse.
func readKey(path string) (*signer, error) {
	key, err := keyutil.PrivateKeyFromFile(path)
	if err != nil {
		return nil, fmt.Errorf(
			"--service-account-private-key-file %q: %w; give a PEM file holding an RSA or ECDSA private key",
			path,
			err,
		)
	}
	s, err := newSigner(key)
	if err != nil {
		return nil, fmt.Errorf("--service-account-private-key-file %q: %w", path, err)
	}
	return s, nil
}

// readCA reads a PEM bundle and checks that it holds certificates, as KCM
// does.
func readCA(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--root-ca-file: %w", err)
	}
	if _, err := certutil.ParseCertsPEM(b); err != nil {
		return nil, fmt.Errorf("--root-ca-file %q: not a PEM-encoded CA bundle: %w", path, err)
	}
	return b, nil
}

// rootCA returns the bundle written to the secrets: --root-ca-file's, else
// the CA data of the root client configuration (none when the host has
// ready-made clients and no configuration).
func (o Options) rootCA(b descriptor.ClientBuilder) ([]byte, error) {
	if o.RootCAFile != "" {
		return readCA(o.RootCAFile)
	}
	cfg, err := b.Config(clientName)
	if err != nil {
		return nil, nil
	}
	return cfg.CAData, nil
}
