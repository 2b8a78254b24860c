// Package collectors registers a built-in's metrics so that every term of
// the controller counts on the same collectors: KCM registers them once
// per process, while a host runs the controller again in each term (and
// after SetControllers turns it off and on) on the same registry.
//
// Guarantees: Register leaves a collector registered on the registry, the
// one an earlier term registered under that name and type if there is
// one; a nil registry leaves every collector unregistered (a controller
// built outside a host, in a unit test); every failure is kept, naming
// the metrics, for Err.
//
// Non-guarantees: a collector registered earlier under the same name with
// other labels or another type is a failure, not replaced.
package collectors

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Registry registers one controller's collectors on a registry.
type Registry struct {
	reg  prometheus.Registerer
	errs []error
}

// On returns a Registry over reg (descriptor.Context.Metrics); nil
// registers nothing.
func On(reg prometheus.Registerer) *Registry { return &Registry{reg: reg} }

// Register registers *c on r's registry; if an earlier term registered a
// collector of that name and type there, *c becomes that one.
func Register[T prometheus.Collector](r *Registry, c *T) {
	if r.reg == nil {
		return
	}
	err := r.reg.Register(*c)
	if err == nil {
		return
	}
	if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
		if existing, ok := are.ExistingCollector.(T); ok {
			*c = existing
			return
		}
	}
	r.errs = append(r.errs, fmt.Errorf("registering metrics: %w", err))
}

// Err returns every registration that failed, joined; nil if none did.
func (r *Registry) Err() error { return errors.Join(r.errs...) }
