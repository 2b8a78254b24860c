package bootstrapsigner

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/utils/clock"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "bootstrap-signer-controller"
	Alias = "bootstrapsigner"
)

// The signed ConfigMap's keys, as KCM and kubeadm name them: the
// kubeconfig signed, and the prefix of each signature's key, followed by
// the token's ID.
const (
	kubeConfigKey      = bootstrapapi.KubeConfigKey
	SignatureKeyPrefix = bootstrapapi.JWSSignatureKeyPrefix
)

// clientName is KCM's name for the controller's client and ServiceAccount.
const clientName = "bootstrap-signer"

// Options configures the signer. None is a flag: KCM hard-codes them. The
// zero value is KCM's default.
type Options struct {
	// ConfigMapNamespace and ConfigMapName name the ConfigMap signed.
	// Defaults (""): kube-public and cluster-info.
	ConfigMapNamespace string
	ConfigMapName      string

	// TokenSecretNamespace is where bootstrap token Secrets live. Default
	// (""): kube-system.
	TokenSecretNamespace string

	// Clock tells whether a token has expired; tests inject a fake one.
	// Default (nil): the real clock.
	Clock clock.PassiveClock
}

// NewOptions returns KCM's defaults.
func NewOptions() Options {
	return Options{
		ConfigMapNamespace:   metav1.NamespacePublic,
		ConfigMapName:        bootstrapapi.ConfigMapClusterInfo,
		TokenSecretNamespace: metav1.NamespaceSystem,
	}
}

// AddFlags registers nothing: KCM has no flag for this controller. It
// exists so that every built-in controller package has the same shape.
func (o *Options) AddFlags(*pflag.FlagSet) {}

func (o Options) withDefaults() Options {
	d := NewOptions()
	if o.ConfigMapNamespace == "" {
		o.ConfigMapNamespace = d.ConfigMapNamespace
	}
	if o.ConfigMapName == "" {
		o.ConfigMapName = d.ConfigMapName
	}
	if o.TokenSecretNamespace == "" {
		o.TokenSecretNamespace = d.TokenSecretNamespace
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Validate reports every invalid field.
func (o Options) Validate() error {
	var errs []error
	check := func(field, v, what string, f func(string) []string) {
		if v == "" {
			return
		}
		if msgs := f(v); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not a %s: %s; leave it empty for the default",
				field, v, what, strings.Join(msgs, "; ")))
		}
	}
	check("ConfigMapNamespace", o.ConfigMapNamespace, "namespace name",
		validation.IsDNS1123Label)
	check("ConfigMapName", o.ConfigMapName, "ConfigMap name", validation.IsDNS1123Subdomain)
	check("TokenSecretNamespace", o.TokenSecretNamespace, "namespace name",
		validation.IsDNS1123Label)
	return errors.Join(errs...)
}
