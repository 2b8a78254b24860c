package tokencleaner

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/controllers/internal/bootstraptoken"
)

// clientName is KCM's name for the cleaner's client and ServiceAccount.
const clientName = "token-cleaner"

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "token-cleaner-controller"
	Alias = "tokencleaner"
)

// ExpirationKey is the data key of a bootstrap token Secret that holds its
// expiry time in RFC 3339 (k8s.io/cluster-bootstrap's
// BootstrapTokenExpirationKey).
const ExpirationKey = bootstraptoken.ExpirationKey

// Options configures the token cleaner. The zero value is KCM's default.
type Options struct {
	// TokenSecretNamespace is where bootstrap token Secrets live. Not a flag
	// (KCM hard-codes it). Default (""): kube-system.
	TokenSecretNamespace string

	// Clock tells when a token expires; tests inject a fake one. Default
	// (nil): the real clock.
	Clock clock.PassiveClock
}

// NewOptions returns KCM's defaults.
func NewOptions() Options { return Options{TokenSecretNamespace: metav1.NamespaceSystem} }

// AddFlags registers nothing: KCM has no flag for this controller. It exists
// so that every built-in controller package has the same shape.
func (o *Options) AddFlags(*pflag.FlagSet) {}

func (o Options) withDefaults() Options {
	if o.TokenSecretNamespace == "" {
		o.TokenSecretNamespace = metav1.NamespaceSystem
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Validate reports every invalid field.
func (o Options) Validate() error {
	if o.TokenSecretNamespace == "" {
		return nil
	}
	if msgs := validation.IsDNS1123Label(o.TokenSecretNamespace); len(msgs) > 0 {
		return fmt.Errorf(
			"TokenSecretNamespace: %q is not a namespace name: %s",
			o.TokenSecretNamespace,
			strings.Join(msgs, "; "),
		)
	}
	return nil
}
