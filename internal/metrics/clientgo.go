package metrics

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/leaderelection"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"
)

var installOnce sync.Once

// InstallClientGoProviders points client-go's process-global metric hooks
// (workqueue.SetProvider, tools/metrics.Register, leaderelection.SetProvider)
// at this package's process-wide series. Only the first call in a process
// does anything; later calls, from any goroutine, return at once. Call it
// before building the work queues, REST clients and leader electors whose
// metrics should be reported, for example when a Manager is built.
//
// client-go accepts each hook only once: if something set one earlier (see
// the package documentation), that hook keeps its earlier provider. It
// also sets them without synchronisation, so the first call races with
// client-go requests already in flight in the process (the race detector
// says so): call it, or build the first Manager, before other client-go
// traffic starts.
func InstallClientGoProviders() {
	installOnce.Do(func() {
		workqueue.SetProvider(workqueueProvider{})
		clientmetrics.Register(restRegisterOpts())
		leaderelection.SetProvider(leaderProvider{})
	})
}

// clientGoCollectors returns every process-wide client-go collector.
func clientGoCollectors() []prometheus.Collector {
	cs := make(
		[]prometheus.Collector,
		0,
		len(workqueueCollectors)+len(restCollectors)+len(leaderCollectors),
	)
	cs = append(cs, workqueueCollectors...)
	cs = append(cs, restCollectors...)
	return append(cs, leaderCollectors...)
}

// RegisterClientGo makes reg expose the process-wide client-go series:
// workqueue_*, rest_client_* and leader_election_*. It may be called for
// several registries, and again for the same one (a no-op then). The series
// hold values only once InstallClientGoProviders has run.
//
// The error joins every collector that could not be registered, typically
// because reg already holds a different collector of the same name.
func RegisterClientGo(reg prometheus.Registerer) error {
	return register(reg, clientGoCollectors()...)
}

// register registers each collector with reg, treating a collector that is
// already registered there as success. It keeps going past failures and
// returns them joined.
func register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return errors.New("metrics: nil prometheus.Registerer")
	}
	var errs []error
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) && are.ExistingCollector == c {
				continue
			}
			errs = append(errs, fmt.Errorf("registering %s: %w", collectorName(c), err))
		}
	}
	return errors.Join(errs...)
}

// collectorName returns the fully-qualified name of c's first metric, for
// error messages.
func collectorName(c prometheus.Collector) string {
	ch := make(chan *prometheus.Desc, 1)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	name := "collector"
	for d := range ch {
		if name != "collector" {
			continue // drain
		}
		s := d.String()
		const key = `fqName: "`
		if i := strings.Index(s, key); i >= 0 {
			s = s[i+len(key):]
			if j := strings.IndexByte(s, '"'); j >= 0 {
				name = s[:j]
			}
		}
	}
	return name
}
