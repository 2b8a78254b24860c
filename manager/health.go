package manager

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/healthz"
)

// Names of the manager's own checks. A controller may not use them.
const (
	CheckPing         = "ping"
	CheckInformerSync = "informer-sync"
)

var allEndpoints = []healthz.Endpoint{healthz.Healthz, healthz.Livez, healthz.Readyz}

// healthChecks registers the manager's checks. Every check is an adaptor
// that is safe to call before, during and after any term.
func (m *Manager) healthChecks() *healthz.Registry {
	reg := &healthz.Registry{}
	reg.Add(healthz.Check{Name: CheckPing, Checker: healthz.Ping}, allEndpoints...)
	reg.Add(healthz.Check{Name: CheckInformerSync, Checker: m.informerSyncCheck}, healthz.Readyz)
	for _, s := range m.order {
		st, _ := s.snapshot()
		switch st.Phase {
		case PhaseDisabled:
			continue
		case PhaseSkipped:
			// Visible in /readyz?verbose, never failing.
			reg.Add(healthz.Check{Name: st.Name, Checker: func(*http.Request) error {
				return healthz.Note("skipped: " + st.Reason)
			}}, healthz.Readyz)
		default:
			reg.Add(healthz.Check{Name: st.Name, Checker: m.controllerCheck(s, false)}, healthz.Healthz, healthz.Livez)
			reg.Add(healthz.Check{Name: st.Name, Checker: m.controllerCheck(s, true)}, healthz.Readyz)
		}
	}
	return reg
}

// controllerCheck is a controller's named check: it fails when the
// controller failed or its HealthChecker fails; for readiness, also while a
// term has not yet started it.
func (m *Manager) controllerCheck(s *state, readiness bool) healthz.Checker {
	return func(req *http.Request) error {
		st, c := s.snapshot()
		switch st.Phase {
		case PhaseFailed:
			return st.Err
		case PhaseRunning:
			if hc, ok := c.(descriptor.HealthChecker); ok {
				return hc.HealthCheck(req)
			}
			return nil
		case PhaseNotStarted, PhaseFinished:
			return nil
		}
		if readiness && m.currentTerm() != nil {
			return fmt.Errorf("controller is %s", st.Phase)
		}
		if readiness && !m.standby() {
			return fmt.Errorf("controller is %s; no term is running", st.Phase)
		}
		return nil
	}
}

// informerSyncCheck is ready when the running term's informers started and
// every started informer synced.
func (m *Manager) informerSyncCheck(*http.Request) error {
	t := m.currentTerm()
	if t == nil {
		if m.standby() {
			return nil
		}
		return errors.New("no term is running")
	}
	return t.set.Synced()
}

// standby reports whether this replica is healthy while running no term
// (a follower that knows its leader). Without leader election there is no
// such state.
func (m *Manager) standby() bool { return false }

// newMux routes the health endpoints and the controllers' debug handlers.
func (m *Manager) newMux() http.Handler {
	mux := http.NewServeMux()
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		mux.Handle(p, m.health)
		mux.Handle(p+"/", m.health)
	}
	mux.HandleFunc(debugPrefix, m.serveDebug)
	return mux
}

const debugPrefix = "/debug/controllers/"

// serveDebug hands /debug/controllers/<name>/... to the named controller's
// DebuggingHandler, with "/debug/controllers/<name>" stripped.
func (m *Manager) serveDebug(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, debugPrefix)
	name, _, _ := strings.Cut(rest, "/")
	s, ok := m.states[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	_, c := s.snapshot()
	if c == nil {
		http.Error(w, fmt.Sprintf("controller %q is not running", name), http.StatusServiceUnavailable)
		return
	}
	d, ok := c.(descriptor.Debuggable)
	if !ok {
		http.NotFound(w, r)
		return
	}
	h := d.DebuggingHandler()
	if h == nil {
		http.NotFound(w, r)
		return
	}
	http.StripPrefix(debugPrefix+name, h).ServeHTTP(w, r)
}
