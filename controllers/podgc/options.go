package podgc

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/utils/clock"
)

// clientName is KCM's name for the collector's client and ServiceAccount.
const clientName = "pod-garbage-collector"

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "pod-garbage-collector-controller"
	Alias = "podgc"
)

// Defaults, as kube-controller-manager has them.
const (
	defaultTerminatedPodGCThreshold = 12500
	defaultGCCheckPeriod            = 20 * time.Second
	DefaultQuarantineTime           = 40 * time.Second
)

// Options configures the pod garbage collector. Use NewOptions for KCM's
// defaults.
type Options struct {
	// TerminatedPodGCThreshold is --terminated-pod-gc-threshold: how many
	// terminated pods may exist before the oldest are deleted. A value <= 0
	// disables the collection of terminated pods (the other collections
	// still run), as in KCM. Default: 12500.
	TerminatedPodGCThreshold int32

	// GCCheckPeriod is the time between passes. Not a flag (KCM hard-codes
	// it). Zero means the default, 20s; negative is invalid.
	GCCheckPeriod time.Duration

	// QuarantineTime is how long a node must be missing from the node
	// informer before a GET checks whether it is really gone and its pods
	// are deleted. Not a flag (KCM hard-codes it). Zero means the default,
	// 40s; negative is invalid.
	QuarantineTime time.Duration

	// Clock drives passes and the quarantine; tests inject a fake one.
	// Default (nil): the real clock.
	Clock clock.WithTicker
}

// NewOptions returns KCM's defaults.
func NewOptions() Options {
	return Options{
		TerminatedPodGCThreshold: defaultTerminatedPodGCThreshold,
		GCCheckPeriod:            defaultGCCheckPeriod,
		QuarantineTime:           DefaultQuarantineTime,
	}
}

// AddFlags binds --terminated-pod-gc-threshold to o, with KCM's name and help
// and o's current value as the default.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(
		&o.TerminatedPodGCThreshold,
		"terminated-pod-gc-threshold",
		o.TerminatedPodGCThreshold,
		"Number of terminated pods that can exist before the terminated pod garbage collector starts "+
			"deleting terminated pods. If <= 0, the terminated pod garbage collector is disabled.",
	)
}

// withDefaults returns a copy with the zero fields that have defaults set.
func (o Options) withDefaults() Options {
	if o.GCCheckPeriod == 0 {
		o.GCCheckPeriod = defaultGCCheckPeriod
	}
	if o.QuarantineTime == 0 {
		o.QuarantineTime = DefaultQuarantineTime
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Validate reports every invalid field. Every threshold is valid: <= 0 means
// disabled, as in KCM.
func (o Options) Validate() error {
	var errs []error
	if o.GCCheckPeriod < 0 {
		errs = append(
			errs,
			fmt.Errorf("GCCheckPeriod: must not be negative, got %v", o.GCCheckPeriod),
		)
	}
	if o.QuarantineTime < 0 {
		errs = append(
			errs,
			fmt.Errorf("QuarantineTime: must not be negative, got %v", o.QuarantineTime),
		)
	}
	return errors.Join(errs...)
}
