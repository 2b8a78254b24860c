package ephemeral

import (
	"fmt"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "ephemeral-volume-controller"
	Alias = "ephemeral-volume"
)

// clientName is KCM's name for the controller's client and ServiceAccount.
const clientName = "ephemeral-volume-controller"

// eventSource is the source component of the controller's events: KCM
// records them as "ephemeral_volume", not under the controller's name.
const eventSource = "ephemeral_volume"

// defaultConcurrentEphemeralVolumeSyncs is KCM's default worker count.
const defaultConcurrentEphemeralVolumeSyncs = 5

// Options configures the controller. Start from NewOptions; a zero worker
// count is invalid, not defaulted, so that
// "--concurrent-ephemeralvolume-syncs=0" is reported rather than ignored
// (KCM rejects it too).
type Options struct {
	// ConcurrentEphemeralVolumeSyncs is --concurrent-ephemeralvolume-syncs:
	// how many pods are synced at once. Default: 5. Must be at least 1.
	ConcurrentEphemeralVolumeSyncs int32
}

// NewOptions returns KCM's defaults.
func NewOptions() Options {
	return Options{ConcurrentEphemeralVolumeSyncs: defaultConcurrentEphemeralVolumeSyncs}
}

// AddFlags binds --concurrent-ephemeralvolume-syncs to o, with KCM's name
// and help and o's current value as the default.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(&o.ConcurrentEphemeralVolumeSyncs, "concurrent-ephemeralvolume-syncs",
		o.ConcurrentEphemeralVolumeSyncs,
		"The number of ephemeral volume syncing operations that will be done concurrently. "+
			"Larger number = faster ephemeral volume updating, but more CPU (and network) load")
}

// Validate reports every invalid field.
func (o Options) Validate() error {
	if o.ConcurrentEphemeralVolumeSyncs < 1 {
		return fmt.Errorf("--concurrent-ephemeralvolume-syncs: must be at least 1, got %d",
			o.ConcurrentEphemeralVolumeSyncs)
	}
	return nil
}

var (
	pvcs = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	pods = corev1.SchemeGroupVersion.WithResource("pods")
)
