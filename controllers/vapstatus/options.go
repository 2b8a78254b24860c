package vapstatus

import (
	"fmt"

	"github.com/spf13/pflag"
	arv1 "k8s.io/api/admissionregistration/v1"
)

// Name is the controller's name in --controllers, as in KCM (which gives
// it no alias). It is also KCM's name for its client and ServiceAccount.
const Name = "validatingadmissionpolicy-status-controller"

// clientName is KCM's name for the controller's client and ServiceAccount.
const clientName = Name

// fieldManager owns the status fields the controller applies, KCM's.
const fieldManager = "validatingadmissionpolicy-status"

// defaultConcurrentPolicySyncs is KCM's default worker count.
const defaultConcurrentPolicySyncs = 5

// Options configures the controller. Use NewOptions for KCM's defaults.
type Options struct {
	// ConcurrentPolicySyncs is
	// --concurrent-validating-admission-policy-status-syncs: how many
	// policies are type-checked at once. Zero means the default, 5 (as
	// KCM's configuration defaulting does); negative is invalid.
	ConcurrentPolicySyncs int32
}

// NewOptions returns KCM's defaults.
func NewOptions() Options {
	return Options{ConcurrentPolicySyncs: defaultConcurrentPolicySyncs}
}

// AddFlags binds KCM's flag for this controller to o, o's current value
// being the default.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(&o.ConcurrentPolicySyncs, "concurrent-validating-admission-policy-status-syncs",
		o.ConcurrentPolicySyncs, "The number of ValidatingAdmissionPolicyStatusController "+
			"workers that are allowed to sync concurrently.")
}

func (o Options) withDefaults() Options {
	if o.ConcurrentPolicySyncs == 0 {
		o.ConcurrentPolicySyncs = defaultConcurrentPolicySyncs
	}
	return o
}

// Validate reports every invalid field.
func (o Options) Validate() error {
	if o.ConcurrentPolicySyncs < 0 {
		return fmt.Errorf("--concurrent-validating-admission-policy-status-syncs: "+
			"must be at least 1 (0 for the default, %d), got %d",
			defaultConcurrentPolicySyncs, o.ConcurrentPolicySyncs)
	}
	return nil
}

var policies = arv1.SchemeGroupVersion.WithResource(
	"validatingadmissionpolicies")
