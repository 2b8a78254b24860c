package rootcacertpublisher

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	certutil "k8s.io/client-go/util/cert"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/sharedflag"
)

// clientName is KCM's name for the publisher's client and ServiceAccount.
const clientName = "root-ca-cert-publisher"

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "root-ca-certificate-publisher-controller"
	Alias = "root-ca-cert-publisher"
)

// Options configures the publisher. The zero value is KCM's default: no
// --root-ca-file, the client's CA is published.
type Options struct {
	// RootCA is the PEM-encoded CA bundle to publish, for hosts that hold it
	// in memory. It must not be set together with RootCAFile. Default: none.
	RootCA []byte

	// RootCAFile is --root-ca-file: the path of a PEM-encoded CA bundle.
	// Default: "" (use the CA of the controller's client configuration).
	RootCAFile string

	// Workers is how many namespaces are synced at once. Not a flag: KCM
	// hard-codes one worker. Zero means the default, 1; negative is invalid.
	Workers int
}

// NewOptions returns KCM's defaults.
func NewOptions() Options { return Options{Workers: 1} }

// AddFlags binds --root-ca-file to o, with KCM's name and help.
//
// In KCM --root-ca-file is one flag read by this controller and by the
// service-account token controller. Both packages' AddFlags may be called
// on one flag set, in either order: the flag is registered once and its
// value reaches both Options.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	sharedflag.String(
		fs,
		&o.RootCAFile,
		"root-ca-file",
		"If set, this root certificate authority will be included in service account's token secret. "+
			"This must be a valid PEM-encoded CA bundle.",
	)
}

// Validate reports every invalid field. It reads RootCAFile, if set, to
// check that it holds PEM certificates.
func (o Options) Validate() error {
	var errs []error
	if o.Workers < 0 {
		errs = append(errs, fmt.Errorf("Workers: must be at least 1, got %d", o.Workers))
	}
	switch {
	case len(o.RootCA) > 0 && o.RootCAFile != "":
		errs = append(errs, errors.New("RootCA and --root-ca-file are both set; set one"))
	case len(o.RootCA) > 0:
		if _, err := certutil.ParseCertsPEM(o.RootCA); err != nil {
			errs = append(errs, fmt.Errorf("RootCA: not a PEM-encoded CA bundle: %w", err))
		}
	case o.RootCAFile != "":
		if _, err := readCA(o.RootCAFile); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// readCA reads a PEM bundle and checks that it holds certificates.
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

// rootCA returns the bundle to publish and where it came from; an empty
// bundle means none is configured.
func (o Options) rootCA(cc descriptor.Context) (ca []byte, source string, err error) {
	switch {
	case len(o.RootCA) > 0:
		return o.RootCA, "Options.RootCA", nil
	case o.RootCAFile != "":
		ca, err := readCA(o.RootCAFile)
		return ca, o.RootCAFile, err
	}
	cfg, err := cc.ClientBuilder.Config(clientName)
	if err != nil {
		// The host has ready-made clients and no configuration.
		return nil, "", nil
	}
	if len(cfg.CAData) > 0 {
		return cfg.CAData, "the client configuration's CA data", nil
	}
	if cfg.CAFile != "" {
		ca, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, "", fmt.Errorf("reading the client configuration's CA file: %w", err)
		}
		return ca, cfg.CAFile, nil
	}
	return nil, "", nil
}
