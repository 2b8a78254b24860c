package manager

import (
	"errors"
	"fmt"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/selection"
)

// ErrUnknownController is wrapped by Build's error for each --controllers
// entry (Options.Controllers) that names no registered controller, name or
// alias; the error lists the known names.
var ErrUnknownController = selection.ErrUnknownController

// SetControllers changes which controllers run, while the Manager runs (or
// before Run): entries are read as --controllers is, with the same rules
// ("*", "name", "-name", aliases, the first entry naming a controller wins,
// DisabledByDefault controllers only when named), against the controllers
// registered when it was built. Feature gates and the cloud-provider rule
// still apply: a controller they skip stays skipped.
//
// Each change is logged and applied to the running terms at once: a
// controller newly disabled is told to stop and waited for within
// ControllerShutdownTimeout (phase disabled); one newly enabled is built
// and started, on the term's informers (see docs/dynamic.md). A term
// that starts later (a new leader term) starts from the current
// selection. A program drives it from its configuration by calling it
// whenever that changes: a file it watches, a ConfigMap it reads.
//
// It returns an error, and changes nothing, when an entry names no
// registered controller (ErrUnknownController), or when the change
// concerns a controller that cannot be started or stopped at runtime: a
// StartFirst controller; a sharded one (its slot terms are planned at
// Build); one skipped by a feature gate, the cloud rule or leader
// migration; a migrated one while this component seeks no migration lock.
// The error names each and why.
func (m *Manager) SetControllers(entries []string) error {
	return m.opts.renameErr(m.setControllers(entries))
}

// setControllers is SetControllers, its messages in KCM's flag names.
func (m *Manager) setControllers(entries []string) error {
	for i, e := range entries {
		if e == "" {
			return fmt.Errorf("manager: SetControllers: entry #%d is empty; "+
				"use a controller name, -name or *", i+1)
		}
	}
	ds := make([]descriptor.Descriptor, 0, len(m.order))
	for _, s := range m.order {
		ds = append(ds, s.Desc)
	}
	sel, err := selection.Resolve(ds, entries)
	if err != nil {
		return fmt.Errorf("manager: SetControllers: %w", err)
	}
	m.selectMu.Lock()
	defer m.selectMu.Unlock()
	changes := map[*state]bool{}
	var errs []error
	for _, s := range m.order {
		on := sel.Enabled(s.Desc)
		if on == s.Enabled.Load() {
			continue
		}
		_, sharded := s.Desc.IsSharded()
		why := s.fixed
		switch {
		case why != "":
		case s.Desc.IsStartFirst():
			why = "it is StartFirst, built before every other controller of its term; " +
				"change --controllers and restart"
		case sharded && s.group != nil:
			why = "it is sharded, and its slot terms are planned at Build; " +
				"change --controllers and restart"
		default:
			changes[s] = on
			continue
		}
		errs = append(errs, fmt.Errorf("controller %q cannot be %s at runtime: %s",
			s.Desc.Name(), onOff(on), why))
	}
	if len(errs) > 0 {
		return fmt.Errorf("manager: SetControllers: nothing changed:\n%w", errors.Join(errs...))
	}
	for _, s := range m.order {
		on, ok := changes[s]
		if !ok {
			continue
		}
		s.Enabled.Store(on)
		m.log.Info("Controller "+onOff(on)+" at runtime",
			"controller", s.Desc.Name(), "controllers", entries)
		if on {
			s.Reenable()
		} else {
			s.DisableWaiting()
		}
	}
	m.host.Reselect()
	if len(changes) > 0 {
		close(m.reselected)
		m.reselected = make(chan struct{})
	}
	return nil
}

// selectionChanged returns a channel closed by the next SetControllers
// that changes the selection.
func (m *Manager) selectionChanged() <-chan struct{} {
	m.selectMu.Lock()
	defer m.selectMu.Unlock()
	return m.reselected
}

func onOff(on bool) string {
	if on {
		return "enabled"
	}
	return "disabled"
}
