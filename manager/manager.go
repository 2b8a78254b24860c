package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/healthz"
	"github.com/ctrlhost/ctrlhost/internal/featuregates"
	"github.com/ctrlhost/ctrlhost/internal/metrics"
	"github.com/ctrlhost/ctrlhost/internal/supervisor"
	"github.com/ctrlhost/ctrlhost/internal/term"
	"github.com/ctrlhost/ctrlhost/serving"
)

// Manager hosts controllers: it selects them, builds them over shared
// informers, runs them, serves their health, and stops them within a bound.
// Build one with NewBuilder.
type Manager struct {
	component   string
	opts        Options
	featureGate featuregate.FeatureGate
	log         logr.Logger

	clients term.Clients // the Manager's clients, and what each controller's are made of
	host    *term.Host   // runs the terms

	order    []*state   // every registered controller, registration order
	selectMu sync.Mutex // serialises SetControllers
	// reselected is closed, and replaced, by every SetControllers that
	// changed something (guarded by selectMu).
	reselected chan struct{}
	selected   []*state          // enabled and not skipped, registration order
	states     map[string]*state // by canonical name

	locks lockPlan // the groups of selected controllers, each run by its own terms

	health  *healthz.Handler
	handler http.Handler
	server  *serving.Server

	registry *prometheus.Registry
	gatherer prometheus.Gatherer // registry and WithMetricsGatherer's, for /metrics
	metrics  *metrics.Controllers
	flushLog func() // set when the Manager built its own logger

	ran     atomic.Bool
	running atomic.Bool
	started chan struct{} // closed when Run starts
	addrMu  sync.Mutex
	addr    net.Addr
}

// Component returns the component name given to NewBuilder.
func (m *Manager) Component() string { return m.component }

// Options returns the defaulted options the Manager runs with.
func (m *Manager) Options() Options { return m.opts }

// Handler serves every path of the Manager's endpoints: /healthz, /livez
// and /readyz (with their per-check sub-paths), /metrics, /statusz and
// /flagz (KCM's z-pages: versions, start time and the paths served; the
// flags as parsed, those annotated "classified" hidden),
// /debug/controllers/ (an index) and /debug/controllers/<name>/ (<name> a
// canonical name or an alias). It is usable before Run and after it
// returns.
//
// Handler applies no authentication and no authorization: anyone who
// reaches it sees every path. It is for mounting on a server of the
// caller's own, which decides who may see what, as it does for its other
// paths; the caller knows its users, the Manager does not. The Manager's
// own server (--secure-port) serves this same handler behind delegated
// authentication and authorization (health paths open, every other path,
// /statusz and /flagz included, authorized as /metrics is) and adds
// /debug/pprof/ with --profiling. Gating only some paths here would
// suggest the others are safe to expose: /metrics and /debug/controllers/
// tell as much as /flagz does.
func (m *Manager) Handler() http.Handler { return m.handler }

// Controllers returns the status of every registered controller, in
// registration order.
func (m *Manager) Controllers() []ControllerStatus {
	out := make([]ControllerStatus, 0, len(m.order))
	for _, s := range m.order {
		st, _ := s.status()
		out = append(out, st)
	}
	return out
}

// Status returns the status of one controller, by canonical name.
func (m *Manager) Status(name string) (ControllerStatus, bool) {
	s, ok := m.states[name]
	if !ok {
		return ControllerStatus{}, false
	}
	st, _ := s.status()
	return st, true
}

// ServingAddr returns the address the endpoints are served on (HTTPS),
// once Run has bound it; nil before that and when serving is disabled.
func (m *Manager) ServingAddr() net.Addr {
	m.addrMu.Lock()
	defer m.addrMu.Unlock()
	return m.addr
}

// Run serves the endpoints and runs the selected controllers until ctx is
// done or something ends it, then stops them within
// ControllerShutdownTimeout and returns.
//
// Without leader election the controllers run in one term for the whole of
// Run. With it, Run campaigns for the lock and runs a term each time it
// wins; losing the lease ends Run with an error wrapping leader.ErrLeaseLost
// (LostLeasePolicy exit), or stops the term and campaigns again
// (recampaign). Leader migration adds the migration lock's terms, and
// sharding a term per slot held; controllers marked WithoutLeaderElection
// run for the whole of Run. On ctx's end the terms stop, then the Leases
// are released.
//
// The error joins every failure: a serving error, an InitFunc error or
// panic, a controller whose Run failed or panicked, controllers that did
// not stop in time, a lost lease. Run may be called once.
func (m *Manager) Run(ctx context.Context) (err error) {
	// Its error names the flags as this Manager's user types them.
	defer func() { err = m.opts.renameErr(err) }()
	if !m.ran.CompareAndSwap(false, true) {
		return errors.New("manager: Run called twice; build a new Manager")
	}
	log := m.log
	ctx = logr.NewContext(ctx, log)
	if m.flushLog != nil {
		defer m.flushLog()
	}
	release, err := featuregates.Claim(m.featureGate, m.opts.FeatureGates, m.component)
	if err != nil {
		return fmt.Errorf("manager %q: %w", m.component, err)
	}
	defer release()
	m.logSelection(log)

	served, err := m.serve(ctx, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, served.Stop()) }()

	m.running.Store(true)
	defer m.running.Store(false)
	close(m.started)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g := supervisor.NewFailFast(cancel)
	// Serving that fails after it started ends Run: health and metrics are
	// gone, and the probes that depend on them would restart the process
	// anyway, without saying why.
	g.Go(ctx, func(ctx context.Context) error {
		if err := served.Wait(ctx); err != nil {
			log.Error(err, "Serving failed; stopping")
			return err
		}
		return nil
	})
	if len(m.locks.unelected) > 0 {
		g.Go(ctx, func(ctx context.Context) error {
			return m.host.Run(ctx, term.Spec{Name: "unelected", States: records(m.locks.unelected)})
		})
	}
	for _, p := range m.locks.shards {
		g.Go(ctx, func(ctx context.Context) error { return m.runShards(ctx, p) })
	}
	main := term.Spec{Name: "main", States: records(m.locks.main.states)}
	if me := m.locks.migration.elector; me != nil {
		main.Alongside = m.migrationCampaign
		// Every replica follows the migration Lease, so that a follower of
		// the main lock knows who runs the migrated controllers (and is
		// ready), as it knows the main lock's holder.
		g.Go(ctx, func(ctx context.Context) error { me.Observe(ctx); return nil })
	}
	switch {
	case m.locks.main.elector == nil:
		g.Go(ctx, func(ctx context.Context) error { return m.host.Run(ctx, main) })
	default:
		g.Go(ctx, func(ctx context.Context) error { return m.runElected(ctx, m.locks.main, main) })
	}
	return g.Wait()
}

// logSelection logs one line per controller that will not run, with why.
func (m *Manager) logSelection(log logr.Logger) {
	for _, s := range m.order {
		st, _ := s.status()
		switch st.Phase {
		case PhaseDisabled:
			log.Info("Controller is disabled", "controller", st.Name, "reason", st.Reason)
		case PhaseSkipped:
			log.Info("Skipping controller", "controller", st.Name, "reason", st.Reason)
		}
	}
}

// serve starts serving unless disabled, so that a port in use fails Run
// before any controller starts.
func (m *Manager) serve(ctx context.Context, log logr.Logger) (*serving.Running, error) {
	r, err := m.server.Start(ctx)
	if err != nil || r.Addr() == nil {
		return r, err
	}
	m.addrMu.Lock()
	m.addr = r.Addr()
	m.addrMu.Unlock()
	log.Info("Serving health, metrics and debug endpoints", "address", "https://"+r.Addr().String(),
		"auth", !m.opts.Serving.DisableAuth)
	return r, nil
}

// ServingCertificate returns the PEM certificate the endpoints are served
// with (the generated self-signed one when no --tls-cert-file was given),
// for clients that should trust it.
func (m *Manager) ServingCertificate() []byte { return m.server.CertPEM() }

// Logger returns the Manager's logger (the default one built from
// Options.Logging, or the one given to WithLogger), with the component's
// name as the "component" value of every line. A program makes its
// logger with logging.ForProgram, which routes klog (client-go's) into it,
// and passes it to WithLogger, so that one process writes one format.
func (m *Manager) Logger() logr.Logger { return m.log }

// Registry returns the metrics registry /metrics serves.
func (m *Manager) Registry() *prometheus.Registry { return m.registry }
