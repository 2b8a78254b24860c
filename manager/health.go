package manager

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/healthz"
	"github.com/ctrlhost/ctrlhost/internal/debugmux"
	"github.com/ctrlhost/ctrlhost/internal/metrics"
	"github.com/ctrlhost/ctrlhost/leader"
)

// Names of the manager's own checks. A controller may not use them.
const (
	CheckPing            = "ping"
	CheckInformerSync    = "informer-sync"
	CheckLeaderElection  = "leader-election"
	CheckLeaderMigration = "leader-migration"
	// CheckSharding is the readiness check of sharding: it passes while
	// this replica is a working member of every shard group, and lists
	// the slots it holds in /readyz?verbose.
	CheckSharding = "sharding"
)

var allEndpoints = []healthz.Endpoint{healthz.EndpointHealthz, healthz.EndpointLivez,
	healthz.EndpointReadyz}

// healthChecks registers the manager's checks. Every check is an adaptor
// that is safe to call before, during and after any term.
func (m *Manager) healthChecks() *healthz.Registry {
	reg := &healthz.Registry{}
	reg.Add(healthz.Check{Name: CheckPing, Checker: healthz.Ping}, allEndpoints...)
	reg.Add(healthz.Check{Name: CheckInformerSync, Checker: m.informerSyncCheck},
		healthz.EndpointReadyz)
	for _, lock := range []struct {
		name string
		e    *leader.Elector
	}{{CheckLeaderElection, m.locks.main.elector}, {CheckLeaderMigration, m.locks.migration.elector}} {
		if lock.e == nil {
			continue
		}
		reg.Add(healthz.Check{Name: lock.name, Checker: lock.e.Watchdog}, healthz.EndpointHealthz,
			healthz.EndpointLivez)
		reg.Add(healthz.Check{Name: lock.name, Checker: roleCheck(lock.e)}, healthz.EndpointReadyz)
	}
	if len(m.locks.shards) > 0 {
		reg.Add(healthz.Check{Name: CheckSharding, Checker: m.shardingCheck}, healthz.EndpointReadyz)
	}
	for _, s := range m.order {
		st, _ := s.status()
		switch {
		case st.Phase == PhaseDisabled && s.fixed != "":
			continue // SetControllers cannot enable it
		case st.Phase == PhaseDisabled:
			// SetControllers may enable it: shown in /readyz, never in
			// /healthz and /livez, which list (as KCM's /healthz does) the
			// controllers selected when the program started.
			check := healthz.Check{Name: st.Name, Checker: m.controllerCheck(s, true)}
			reg.Add(check, healthz.EndpointReadyz)
		case st.Phase == PhaseSkipped:
			// Visible in /readyz?verbose, never failing.
			reg.Add(healthz.Check{Name: st.Name, Checker: func(*http.Request) error {
				return healthz.Note("skipped: " + st.Reason)
			}}, healthz.EndpointReadyz)
		default:
			reg.Add(healthz.Check{Name: st.Name, Checker: m.controllerCheck(s, false)},
				healthz.EndpointHealthz, healthz.EndpointLivez)
			reg.Add(healthz.Check{Name: st.Name, Checker: m.controllerCheck(s, true)},
				healthz.EndpointReadyz)
		}
	}
	return reg
}

// controllerCheck is a controller's named check: it fails when the
// controller failed or its HealthChecker fails; for readiness, also while a
// term has not yet started it.
func (m *Manager) controllerCheck(s *state, readiness bool) healthz.Checker {
	check := m.controllerCheckOnce(s, readiness)
	if readiness {
		return check
	}
	return func(req *http.Request) error {
		err := check(req)
		m.metrics.HealthCheck(s.Desc.Name(), healthz.Passed(err))
		return err
	}
}

// roleCheck is a lock's readiness check: it passes while this replica leads
// or follows a known leader, and says which, with the identities, in
// /readyz?verbose (health paths need no credentials).
func roleCheck(e *leader.Elector) healthz.Checker {
	return func(req *http.Request) error {
		if err := e.Ready(req); err != nil {
			return err
		}
		if e.IsLeader() {
			return healthz.Note("leading as " + e.Identity())
		}
		return healthz.Note("following " + e.Leader() + " as " + e.Identity())
	}
}

func (m *Manager) controllerCheckOnce(s *state, readiness bool) healthz.Checker {
	return func(req *http.Request) error {
		if s.group != nil {
			return m.shardedCheck(s, readiness, req)
		}
		st, c := s.status()
		switch st.Phase {
		case PhaseFailed:
			return st.Err
		case PhaseRunning:
			live, ready := descriptor.HealthChecks(c)
			if readiness {
				return ready(req)
			}
			return live(req)
		case PhaseNotStarted, PhaseFinished:
			return nil
		case PhaseUnserved, PhaseDisabled:
			return healthz.Note(st.Reason)
		}
		if !readiness {
			return nil
		}
		if s.lock != nil && !s.lock.IsLeader() {
			// A follower is ready when it knows who leads.
			return s.lock.Ready(req)
		}
		return fmt.Errorf("controller is %s", st.Phase)
	}
}

// informerSyncCheck is ready when the running term's informers started and
// every started informer synced.
func (m *Manager) informerSyncCheck(req *http.Request) error {
	terms := m.host.Synced()
	if len(terms) == 0 {
		if e := m.locks.main.elector; e != nil && !e.IsLeader() {
			return e.Ready(req)
		}
		return errors.New("no term is running")
	}
	var errs []error
	var notes []string
	for _, t := range terms {
		m.metrics.InformersSynced(t.Term, t.Err == nil)
		switch {
		case t.Err == nil:
		case t.Slot:
			// A slot term's caches fill while its slot changes hands:
			// shown, not failing (see shardedCheck).
			notes = append(notes, fmt.Sprintf("term %s: %v", t.Term, t.Err))
		default:
			errs = append(errs, fmt.Errorf("term %s: %w", t.Term, t.Err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if len(notes) > 0 {
		return healthz.Note(strings.Join(notes, "; "))
	}
	return nil
}

// newMux routes the health endpoints and the controllers' debug handlers.
func (m *Manager) newMux(z zpageHandlers) http.Handler {
	mux := http.NewServeMux()
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		mux.Handle(p, m.health)
		mux.Handle(p+"/", m.health)
	}
	mux.Handle(debugPrefix, m.debugHandler())
	mux.Handle("/metrics", metrics.Handler(m.gatherer))
	mux.Handle(statuszPath, z.statusz)
	mux.Handle(flagzPath, z.flagz)
	return mux
}

const debugPrefix = "/debug/controllers/"

// debugHandler serves the running controllers' debugging pages.
func (m *Manager) debugHandler() http.Handler {
	names := func() []string {
		out := make([]string, 0, len(m.order))
		for _, s := range m.order {
			out = append(out, s.Desc.Name())
		}
		return out
	}
	return debugmux.New(debugPrefix, names, func(name string) (descriptor.Controller, bool) {
		s, ok := m.states[name]
		if !ok {
			// An alias reaches the controller too: KCM before 1.28 served
			// these pages under the short names that are aliases now.
			for _, o := range m.order {
				if slices.Contains(o.Desc.Aliases(), name) {
					s, ok = o, true
					break
				}
			}
		}
		if !ok {
			return nil, false
		}
		_, c := s.status()
		return c, true
	})
}
