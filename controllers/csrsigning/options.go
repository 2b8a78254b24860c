package csrsigning

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	certv1 "k8s.io/api/certificates/v1"
	"k8s.io/utils/clock"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "certificatesigningrequest-signing-controller"
	Alias = "csrsigning"
)

// clientName is KCM's name for the client (and ServiceAccount) of its
// three certificate controllers.
const clientName = "certificate-controller"

// defaultClusterSigningDuration is KCM's --cluster-signing-duration: a
// year.
const defaultClusterSigningDuration = 365 * 24 * time.Hour

// legacyUnknownSignerName is the signer of requests made through the
// removed certificates.k8s.io/v1beta1 API without a signer.
const legacyUnknownSignerName = "kubernetes.io/legacy-unknown"

// Files are a signer's CA certificate and private key, PEM-encoded (the
// key RSA or ECDSA, PKCS#1, SEC 1 or PKCS#8).
type Files struct {
	CertFile, KeyFile string
}

func (f Files) set() bool { return f.CertFile != "" || f.KeyFile != "" }

// Options configures the controller. Use NewOptions for KCM's defaults.
type Options struct {
	// ClusterSigningCertFile and ClusterSigningKeyFile are
	// --cluster-signing-cert-file and --cluster-signing-key-file: the CA
	// of all four kubernetes.io signers, unless the per-signer files are
	// set. Default: none.
	ClusterSigningCertFile, ClusterSigningKeyFile string

	// KubeletServing, KubeletClient, KubeAPIServerClient and LegacyUnknown
	// are --cluster-signing-{kubelet-serving,kubelet-client,
	// kube-apiserver-client,legacy-unknown}-{cert,key}-file: one signer's
	// CA each. When any is set, the cluster-wide pair must not be, and a
	// signer without its own pair does not sign. Default: none.
	KubeletServing, KubeletClient, KubeAPIServerClient, LegacyUnknown Files

	// ClusterSigningDuration is --cluster-signing-duration: the longest
	// validity of a certificate; a request may ask for less with
	// spec.expirationSeconds. Default: a year (8760h).
	ClusterSigningDuration time.Duration

	// Clock dates the certificates; tests inject a fake one. Default
	// (nil): the real clock.
	Clock clock.PassiveClock
}

// NewOptions returns KCM's defaults.
func NewOptions() Options {
	return Options{ClusterSigningDuration: defaultClusterSigningDuration}
}

// flagOf is the flag-name part of each signer's files.
var flagOf = map[string]string{
	certv1.KubeletServingSignerName:             "kubelet-serving",
	certv1.KubeAPIServerClientKubeletSignerName: "kubelet-client",
	certv1.KubeAPIServerClientSignerName:        "kube-apiserver-client",
	legacyUnknownSignerName:                     "legacy-unknown",
}

// signerNames are the four kubernetes.io signers, in KCM's start order.
var signerNames = []string{
	certv1.KubeletServingSignerName, certv1.KubeAPIServerClientKubeletSignerName,
	certv1.KubeAPIServerClientSignerName, legacyUnknownSignerName,
}

// perSigner returns the Files field of a signer.
func (o *Options) perSigner(signer string) *Files {
	switch signer {
	case certv1.KubeletServingSignerName:
		return &o.KubeletServing
	case certv1.KubeAPIServerClientKubeletSignerName:
		return &o.KubeletClient
	case certv1.KubeAPIServerClientSignerName:
		return &o.KubeAPIServerClient
	default:
		return &o.LegacyUnknown
	}
}

// AddFlags binds KCM's flags of the controller to o, with KCM's names
// and o's current values as defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ClusterSigningCertFile, "cluster-signing-cert-file",
		o.ClusterSigningCertFile, "PEM-encoded X509 CA certificate that signs the certificates "+
			"of all four kubernetes.io signers. Not together with the per-signer "+
			"--cluster-signing-*-file flags.")
	fs.StringVar(&o.ClusterSigningKeyFile, "cluster-signing-key-file",
		o.ClusterSigningKeyFile, "PEM-encoded RSA or ECDSA private key of "+
			"--cluster-signing-cert-file. Not together with the per-signer "+
			"--cluster-signing-*-file flags.")
	for _, signer := range signerNames {
		f := o.perSigner(signer)
		prefix := "cluster-signing-" + flagOf[signer]
		fs.StringVar(&f.CertFile, prefix+"-cert-file", f.CertFile,
			"PEM-encoded X509 CA certificate that signs the certificates of the "+signer+
				" signer. Not together with --cluster-signing-{cert,key}-file.")
		fs.StringVar(&f.KeyFile, prefix+"-key-file", f.KeyFile,
			"PEM-encoded RSA or ECDSA private key of --"+prefix+"-cert-file. Not together "+
				"with --cluster-signing-{cert,key}-file.")
	}
	fs.DurationVar(&o.ClusterSigningDuration, "cluster-signing-duration",
		o.ClusterSigningDuration, "The longest validity of the certificates signed. A request "+
			"may ask for a shorter one with spec.expirationSeconds.")
}

// Validate reports every invalid field, naming its flag.
func (o Options) Validate() error {
	var errs []error
	pair := func(flag string, f Files) {
		switch {
		case f.CertFile != "" && f.KeyFile == "":
			errs = append(errs, fmt.Errorf("--%s-cert-file is set without --%s-key-file; "+
				"set both or neither", flag, flag))
		case f.CertFile == "" && f.KeyFile != "":
			errs = append(errs, fmt.Errorf("--%s-key-file is set without --%s-cert-file; "+
				"set both or neither", flag, flag))
		}
	}
	cluster := Files{o.ClusterSigningCertFile, o.ClusterSigningKeyFile}
	pair("cluster-signing", cluster)
	for _, signer := range signerNames {
		pair("cluster-signing-"+flagOf[signer], *o.perSigner(signer))
	}
	if cluster.set() && o.anyPerSigner() {
		errs = append(errs, errors.New("--cluster-signing-{cert,key}-file and the per-signer "+
			"--cluster-signing-*-{cert,key}-file flags are both set; set one or the other"))
	}
	if o.ClusterSigningDuration <= 0 {
		errs = append(errs, fmt.Errorf("--cluster-signing-duration: must be positive, got %v",
			o.ClusterSigningDuration))
	}
	return errors.Join(errs...)
}

func (o *Options) anyPerSigner() bool {
	for _, signer := range signerNames {
		if o.perSigner(signer).set() {
			return true
		}
	}
	return false
}

// files returns the CA files of each signer that signs, as KCM chooses
// them: the per-signer pairs when any is set, else the cluster-wide pair
// for all four, else none.
func (o Options) files() map[string]Files {
	out := map[string]Files{}
	for _, signer := range signerNames {
		switch f := *o.perSigner(signer); {
		case o.anyPerSigner():
			if f.set() {
				out[signer] = f
			}
		case o.ClusterSigningCertFile != "":
			out[signer] = Files{o.ClusterSigningCertFile, o.ClusterSigningKeyFile}
		}
	}
	return out
}
