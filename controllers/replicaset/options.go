package replicaset

import (
	"fmt"

	"github.com/spf13/pflag"
)

// Default worker counts, as kube-controller-manager has them.
const (
	defaultConcurrentReplicaSetSyncs = 5
	defaultConcurrentRCSyncs         = 5
)

// burstReplicas is the most pods one sync creates or deletes; the rest wait
// until those have been observed (kube-controller-manager's value).
const burstReplicas = 500

// Options configures both controllers of this package. Start from
// NewOptions; a zero field is invalid, not defaulted, so that
// "--concurrent-replicaset-syncs=0" is reported rather than ignored.
type Options struct {
	// ConcurrentReplicaSetSyncs is how many ReplicaSets are synced at once
	// (--concurrent-replicaset-syncs). Default: 5. Must be at least 1.
	ConcurrentReplicaSetSyncs int32
	// ConcurrentRCSyncs is how many ReplicationControllers are synced at
	// once (--concurrent-rc-syncs). Default: 5. Must be at least 1.
	ConcurrentRCSyncs int32
}

// NewOptions returns Options with kube-controller-manager's defaults.
func NewOptions() Options {
	return Options{
		ConcurrentReplicaSetSyncs: defaultConcurrentReplicaSetSyncs,
		ConcurrentRCSyncs:         defaultConcurrentRCSyncs,
	}
}

// AddFlags binds o to kube-controller-manager's flags. (KCM registers the
// second as "concurrent_rc_syncs" and relies on its flag-name normalizer to
// accept "--concurrent-rc-syncs"; here it is registered under the dashed
// name directly.)
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(
		&o.ConcurrentReplicaSetSyncs,
		"concurrent-replicaset-syncs",
		o.ConcurrentReplicaSetSyncs,
		"The number of replica sets that are allowed to sync concurrently. Larger number = more "+
			"responsive replica management, but more CPU (and network) load",
	)
	fs.Int32Var(
		&o.ConcurrentRCSyncs,
		"concurrent-rc-syncs",
		o.ConcurrentRCSyncs,
		"The number of replication controllers that are allowed to sync concurrently. Larger number = "+
			"more responsive replica management, but more CPU (and network) load",
	)
}

func validateWorkers(flag string, n int32) error {
	if n < 1 {
		return fmt.Errorf("--%s: must be at least 1, got %d", flag, n)
	}
	return nil
}
