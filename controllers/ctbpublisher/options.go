package ctbpublisher

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	certv1 "k8s.io/api/certificates/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/sharedflag"
)

// Name is the controller's name in --controllers, as in KCM (which gives
// it no alias).
const Name = "kube-apiserver-serving-clustertrustbundle-publisher-controller"

// clientName is KCM's name for the controller's client and ServiceAccount.
const clientName = "kube-apiserver-serving-clustertrustbundle-publisher"

// SignerName is the signer whose trust bundle is published: the
// kube-apiserver's serving certificates'.
const SignerName = "kubernetes.io/kube-apiserver-serving"

// FeatureClusterTrustBundle is KCM's gate of the controller (GA, on by
// default, in Kubernetes 1.37): when it is off the controller does not
// start. It is consulted through descriptor.Context.FeatureGate when the
// host registers it; otherwise its Kubernetes 1.37 default applies.
const FeatureClusterTrustBundle = featuregate.Feature("ClusterTrustBundle")

// FeatureSpecs returns the gate above with its Kubernetes 1.37 default,
// for a program to add to its feature gate (so that --feature-gates can
// set it).
func FeatureSpecs() map[featuregate.Feature]featuregate.FeatureSpec {
	return map[featuregate.Feature]featuregate.FeatureSpec{
		FeatureClusterTrustBundle: {Default: true, PreRelease: featuregate.GA},
	}
}

// Options configures the publisher. The zero value is KCM's default: no
// --root-ca-file, the CA of the controller's client configuration is
// published.
type Options struct {
	// RootCA is the PEM-encoded CA bundle to publish, for hosts that hold it
	// in memory. It must not be set together with RootCAFile. Default: none.
	RootCA []byte

	// RootCAFile is --root-ca-file: the path of a PEM-encoded CA bundle.
	// Default: "" (the CA of the controller's client configuration).
	RootCAFile string
}

// NewOptions returns KCM's defaults.
func NewOptions() Options { return Options{} }

// AddFlags binds --root-ca-file to o, with KCM's name and help.
//
// In KCM --root-ca-file is one flag, read by this controller, the root CA
// publisher and the service-account token controller. Their packages'
// AddFlags may all be called on one flag set, in any order: the flag is
// registered once and its value reaches every Options.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	sharedflag.String(fs, &o.RootCAFile, "root-ca-file",
		"If set, this root certificate authority will be included in service account's token "+
			"secret. This must be a valid PEM-encoded CA bundle.")
}

// Validate reports every invalid field. It reads RootCAFile, if set, to
// check that it holds PEM certificates.
func (o Options) Validate() error {
	switch {
	case len(o.RootCA) > 0 && o.RootCAFile != "":
		return errors.New("RootCA and --root-ca-file are both set; set one")
	case len(o.RootCA) > 0:
		if _, err := certutil.ParseCertsPEM(o.RootCA); err != nil {
			return fmt.Errorf("RootCA: not a PEM-encoded CA bundle: %w", err)
		}
	case o.RootCAFile != "":
		_, err := readCA(o.RootCAFile, "--root-ca-file")
		return err
	}
	return nil
}

// readCA reads a PEM bundle and checks that it holds certificates; what
// names where it came from in errors.
func readCA(path, what string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if _, err := certutil.ParseCertsPEM(b); err != nil {
		return nil, fmt.Errorf("%s %q: not a PEM-encoded CA bundle: %w", what, path, err)
	}
	return b, nil
}

// rootCA returns the bundle to publish and where it came from: RootCA,
// --root-ca-file, else the CA data, else the CA file, of the client
// configuration. An empty bundle means none is configured.
func (o Options) rootCA(cc descriptor.Context) (ca []byte, source string, err error) {
	switch {
	case len(o.RootCA) > 0:
		return o.RootCA, "Options.RootCA", nil
	case o.RootCAFile != "":
		ca, err := readCA(o.RootCAFile, "--root-ca-file")
		return ca, o.RootCAFile, err
	}
	cfg, err := cc.ClientBuilder.Config(clientName)
	switch {
	case err != nil:
		return nil, "", nil // a host of ready-made clients has no configuration
	case len(cfg.CAData) > 0:
		if _, err := certutil.ParseCertsPEM(cfg.CAData); err != nil {
			return nil, "", fmt.Errorf(
				"the client configuration's CA data: not a PEM-encoded CA bundle: %w", err)
		}
		return cfg.CAData, "the client configuration's CA data", nil
	case cfg.CAFile != "":
		ca, err := readCA(cfg.CAFile, "the client configuration's CA file")
		return ca, cfg.CAFile, err
	}
	return nil, "", nil
}

var bundles = certv1.SchemeGroupVersion.WithResource("clustertrustbundles")
