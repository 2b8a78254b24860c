package manager

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/spf13/pflag"
)

// processFlags are the flags AddFlags adds that belong to the process, not
// to one Manager: the API server and how to talk to it, the feature gates
// (one process, one gate) and logging (one process, one logger). Logging's
// flags are found by asking logging.Options for them.
var processFlags = map[string]bool{
	"kubeconfig": true, "master": true,
	"kube-api-qps": true, "kube-api-burst": true, "kube-api-content-type": true,
	"feature-gates": true,
}

// isProcessFlag reports whether AddFlags' flag name is process-wide.
func isProcessFlag(name string, logging map[string]bool) bool {
	return processFlags[name] || logging[name]
}

// loggingFlags names the flags logging.Options adds.
func loggingFlags() map[string]bool {
	var o Options
	fs := pflag.NewFlagSet("logging", pflag.ContinueOnError)
	o.Logging.AddFlags(fs)
	out := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { out[f.Name] = true })
	return out
}

// AddProcessFlags adds to fs, bound to o, the flags of AddFlags that
// belong to the process rather than to one Manager: --kubeconfig,
// --master, --kube-api-qps, --kube-api-burst, --kube-api-content-type,
// --feature-gates and the logging flags (-v, --logging-format, ...). A
// program with several Managers adds them once, from one Options, and
// gives them to the others' with ShareProcess; each Manager's own flags
// come from AddManagerFlags under a prefix of its own.
func (o *Options) AddProcessFlags(fs *pflag.FlagSet) { o.addFlagsWhere(fs, "", true) }

// AddManagerFlags adds to fs, bound to o, every flag of AddFlags that is
// not process-wide (AddProcessFlags), each named prefix followed by its
// KCM name: with prefix "ccm-", --ccm-controllers, --ccm-secure-port,
// --ccm-leader-elect. Two Managers' flags then live on one flag set side
// by side (two AddFlags on one set panic: flag redefined). An empty prefix
// adds them under their KCM names.
//
// The help texts name the other flags they mention with the same prefix
// (--ccm-tls-cert-file's says --ccm-tls-private-key-file). o remembers
// the prefix: Build's errors and warnings and the Manager's log lines name
// its flags as its user types them (--ccm-secure-port=0, not
// --secure-port=0); the process-wide flags keep their names.
func (o *Options) AddManagerFlags(fs *pflag.FlagSet, prefix string) {
	o.addFlagsWhere(fs, prefix, false)
	o.flagPrefix = prefix
}

// addFlagsWhere adds AddFlags' process-wide flags (process) or the others,
// renamed with prefix, as are the flags their help texts name.
func (o *Options) addFlagsWhere(fs *pflag.FlagSet, prefix string, process bool) {
	all := pflag.NewFlagSet("all", pflag.ContinueOnError)
	o.AddFlags(all)
	logging := loggingFlags()
	all.VisitAll(func(f *pflag.Flag) {
		if isProcessFlag(f.Name, logging) != process {
			return
		}
		g := *f
		g.Name = prefix + f.Name
		g.Usage = renameFlags(f.Usage, prefix, true)
		if prefix != "" {
			g.Shorthand = "" // -v stays the process's
		}
		fs.AddFlag(&g)
	})
}

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
