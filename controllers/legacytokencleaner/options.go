package legacytokencleaner

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "legacy-serviceaccount-token-cleaner-controller"
	Alias = "legacy-service-account-token-cleaner"
)

// The labels the API server and this controller keep on Secret-based
// ServiceAccount tokens, and the ConfigMap in kube-system where the API
// server records since when it tracks their use. Their values are dates,
// YYYY-MM-DD, in UTC.
const (
	LastUsedLabel        = "kubernetes.io/legacy-token-last-used"
	InvalidSinceLabel    = "kubernetes.io/legacy-token-invalid-since"
	TrackingConfigMap    = "kube-apiserver-legacy-service-account-token-tracking"
	TrackingConfigMapKey = "since"
)

// Defaults, as KCM has them.
const (
	defaultCleanUpPeriod = 365 * 24 * time.Hour
	defaultSyncInterval  = 24 * time.Hour
)

// clientName is KCM's name for the controller's client and ServiceAccount.
const clientName = "legacy-service-account-token-cleaner"

// Options configures the cleaner. Use NewOptions for KCM's defaults.
type Options struct {
	// CleanUpPeriod is --legacy-service-account-token-clean-up-period: how
	// long a token must have gone unused before it is marked invalid, and
	// how long it must then have stayed marked before it is deleted. It
	// must be positive (KCM refuses to start the controller otherwise).
	// Default: 365 days.
	CleanUpPeriod time.Duration

	// SyncInterval is the time between passes. Not a flag (KCM hard-codes
	// it). Zero means the default, 24h; negative is invalid.
	SyncInterval time.Duration

	// Clock dates the passes and spaces them; tests inject a fake one.
	// Default (nil): the real clock.
	Clock clock.WithTicker
}

// NewOptions returns KCM's defaults.
func NewOptions() Options {
	return Options{CleanUpPeriod: defaultCleanUpPeriod, SyncInterval: defaultSyncInterval}
}

// AddFlags binds --legacy-service-account-token-clean-up-period to o, with
// KCM's name and help and o's current value as the default.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&o.CleanUpPeriod, "legacy-service-account-token-clean-up-period",
		o.CleanUpPeriod, "The period of time since the last usage of an legacy service account "+
			"token before it can be deleted.")
}

func (o Options) withDefaults() Options {
	if o.SyncInterval == 0 {
		o.SyncInterval = defaultSyncInterval
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Validate reports every invalid field.
func (o Options) Validate() error {
	var errs []error
	if o.CleanUpPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--legacy-service-account-token-clean-up-period "+
			"(CleanUpPeriod): must be positive, got %v; the default is %v",
			o.CleanUpPeriod, defaultCleanUpPeriod))
	}
	if o.SyncInterval < 0 {
		errs = append(errs, fmt.Errorf("SyncInterval: must not be negative, got %v; "+
			"leave it zero for the default, %v", o.SyncInterval, defaultSyncInterval))
	}
	return errors.Join(errs...)
}

var (
	secrets         = corev1.SchemeGroupVersion.WithResource("secrets")
	serviceAccounts = corev1.SchemeGroupVersion.WithResource("serviceaccounts")
	pods            = corev1.SchemeGroupVersion.WithResource("pods")
)

// podReads are the fields of a pod that can name a Secret, as KCM visits
// them: image pull secrets, every container's env and envFrom references,
// and the volume sources that take a Secret.
var podReads = func() []string {
	out := []string{"spec.imagePullSecrets"}
	for _, c := range []string{"containers", "initContainers", "ephemeralContainers"} {
		out = append(out, "spec."+c+".env.valueFrom.secretKeyRef.name",
			"spec."+c+".envFrom.secretRef.name")
	}
	for _, v := range []string{"azureFile.secretName", "cephfs.secretRef", "cinder.secretRef",
		"flexVolume.secretRef", "projected.sources.secret.name", "rbd.secretRef",
		"secret.secretName", "scaleIO.secretRef", "iscsi.secretRef", "storageos.secretRef",
		"csi.nodePublishSecretRef"} {
		out = append(out, "spec.volumes."+v)
	}
	return out
}()
