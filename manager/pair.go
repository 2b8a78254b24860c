package manager

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
)

// ShareProcess copies the process-wide settings of p (those
// AddProcessFlags sets) into o, leaving o's own alone: each Manager of a
// program then talks to the same API server with the same budget, reads
// the same feature gates and logs alike.
func (o *Options) ShareProcess(p Options) {
	o.Kubeconfig, o.Master = p.Kubeconfig, p.Master
	o.KubeAPIQPS, o.KubeAPIBurst, o.KubeAPIContentType = p.KubeAPIQPS, p.KubeAPIBurst,
		p.KubeAPIContentType
	o.FeatureGates = maps.Clone(p.FeatureGates)
	o.Logging = p.Logging
}

// RunAll runs every Manager (Run) until ctx is done or one of them
// returns: then the others are told to stop too, and RunAll returns once
// all have, with their errors joined (one that stopped because another
// did reports nothing of its own). Each Manager's error says which it is,
// as `manager "pod-janitor": ...` (its NewBuilder name), names its flags
// as its user types them (AddManagerFlags), and unwraps to what Run
// returned. It is how a program with several Managers (a controller
// manager and a cloud controller manager in one binary) keeps them
// together: one that fails, or loses its lease under the exit policy,
// does not leave the others running alone.
func RunAll(ctx context.Context, ms ...*Manager) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(ms))
	for _, m := range ms {
		go func() {
			err := m.Run(ctx)
			cancel() // the first to return stops the others
			errs <- m.named(err)
		}()
	}
	var all []error
	for range ms {
		if err := <-errs; err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

// named is err, an error of m's Run, saying which Manager it is.
func (m *Manager) named(err error) error {
	if err == nil {
		return nil
	}
	err = m.opts.renameErr(err)
	// Some of Run's errors say so already.
	if strings.HasPrefix(err.Error(), fmt.Sprintf("manager %q: ", m.component)) {
		return err
	}
	return fmt.Errorf("manager %q: %w", m.component, err)
}
