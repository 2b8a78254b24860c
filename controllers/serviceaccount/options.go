package serviceaccount

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
)

// clientName is KCM's name for the controller's client and ServiceAccount.
const clientName = "service-account-controller"

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "serviceaccount-controller"
	Alias = "serviceaccount"
)

// defaultServiceAccount is the service account KCM ensures in every
// namespace.
const defaultServiceAccount = "default"

// Options configures the service account controller. Use NewOptions for
// KCM's defaults.
type Options struct {
	// ServiceAccounts are the names of the service accounts to ensure in
	// every active namespace. Default (nil): ["default"].
	ServiceAccounts []string

	// Workers is how many namespaces are synced at once. Not a flag: KCM
	// hard-codes one worker. Zero means the default, 1; negative is invalid.
	Workers int
}

// NewOptions returns KCM's defaults.
func NewOptions() Options {
	return Options{ServiceAccounts: []string{defaultServiceAccount}, Workers: 1}
}

// AddFlags registers nothing: KCM has no flag for this controller. It exists
// so that every built-in controller package has the same shape.
func (o *Options) AddFlags(*pflag.FlagSet) {}

func (o Options) withDefaults() Options {
	if o.ServiceAccounts == nil {
		o.ServiceAccounts = []string{defaultServiceAccount}
	}
	if o.Workers == 0 {
		o.Workers = 1
	}
	return o
}

// Validate reports every invalid field.
func (o Options) Validate() error {
	var errs []error
	if o.Workers < 0 {
		errs = append(errs, fmt.Errorf("Workers: must be at least 1, got %d", o.Workers))
	}
	if o.ServiceAccounts != nil && len(o.ServiceAccounts) == 0 {
		errs = append(
			errs,
			errors.New("ServiceAccounts: must not be empty; leave it nil for [\"default\"]"),
		)
	}
	for _, n := range o.ServiceAccounts {
		if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			errs = append(
				errs,
				fmt.Errorf(
					"ServiceAccounts: %q is not a valid name: %s",
					n,
					strings.Join(msgs, "; "),
				),
			)
		}
	}
	return errors.Join(errs...)
}
