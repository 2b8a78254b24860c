package sim

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/ctrlhost/ctrlhost/manager"
)

// Result is what a run found.
type Result struct {
	Violations []string
	Trace      []string
	// Rejected: Build refused the lease settings (as it must when they
	// leave no stop budget).
	Rejected error
}

// debugStacksAt, when set (SIM_DEBUG_STACKS_AT, a duration, with
// SIM_DEBUG_STACKS_FILE), writes every goroutine's stack at that instant
// of the run, for debugging a seed.
var debugStacksAt, _ = time.ParseDuration(os.Getenv("SIM_DEBUG_STACKS_AT"))

const (
	tick         = 250 * time.Millisecond
	restartDelay = time.Second
	// runBound bounds how long a replica's Run may take to return once
	// cancelled; far past any term's stop bound.
	runBound = 10 * time.Minute
)

// Run runs cfg to its end. It must be called inside a testing/synctest
// bubble: it waits in fake time. dir is for the migration file.
func Run(cfg Config, dir string) Result {
	w := newWorld(cfg)
	var migration string
	if cfg.Migration {
		var err error
		if migration, err = writeMigrationFile(dir, cfg); err != nil {
			return Result{Violations: []string{err.Error()}}
		}
	}
	d := &driver{w: w, migration: migration, replicas: make([]*replica, cfg.Replicas),
		gens: make([]int, cfg.Replicas)}
	for i := range cfg.Replicas {
		if err := d.start(i); err != nil {
			return d.rejected(err)
		}
	}
	d.loop()
	d.finish()
	for _, name := range w.idle() {
		w.violate("progress: %s ran for ten seconds or more, yet none of its writes went through", name)
	}
	for _, u := range w.unnamed() {
		w.violate("overlap: %s ran, fenced, beside another replica's instance, but "+
			"its replica never named it", u)
	}
	if w.keys != nil {
		for _, k := range w.keys.lost() {
			w.violate("queues: a key was lost: %s", k)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return Result{Violations: slices.Clone(w.violations), Trace: slices.Clone(w.trace)}
}

type driver struct {
	w         *World
	migration string
	replicas  []*replica
	gens      []int
	ended     []*replica // replicas whose Run returned, checked
	disturbed time.Time  // the last fault, restart or stop
	reported  map[string]bool
}

func (d *driver) start(i int) error {
	r, err := d.w.startReplica(i, d.gens[i], d.migration)
	if err != nil {
		return err
	}
	if d.w.cfg.StopBudget() <= 0 {
		d.w.tracef("Build accepted lease settings that leave no stop budget (%v)", d.w.cfg.StopBudget())
	}
	d.gens[i]++
	d.replicas[i] = r
	d.disturbed = time.Now()
	return nil
}

// rejected checks a Build error: only lease settings without a stop budget
// may be refused, and the error must name the three flags.
func (d *driver) rejected(err error) Result {
	res := Result{Rejected: err}
	if d.w.cfg.StopBudget() > 0 {
		res.Violations = append(res.Violations,
			fmt.Sprintf("Build rejected a valid configuration: %v", err))
		return d.cleanup(res)
	}
	// (Where RenewDeadline is not even below LeaseDuration, that rule is
	// the one reported, naming two of the flags.)
	for _, flag := range []string{"--leader-elect-lease-duration", "--leader-elect-renew-deadline"} {
		if !strings.Contains(err.Error(), flag) {
			res.Violations = append(res.Violations, fmt.Sprintf("Build's error for settings without a "+
				"stop budget does not name %s: %v", flag, err))
		}
	}
	return d.cleanup(res)
}

// cleanup stops replicas started before a rejected Build.
func (d *driver) cleanup(res Result) Result {
	for _, r := range d.replicas {
		if r != nil {
			r.cancel()
			<-r.done
		}
	}
	close(d.w.release)
	d.w.cancelReleased()
	return res
}

// loop plays the fault schedule, restarts replicas and checks readiness
// until the configured duration.
func (d *driver) loop() {
	cfg := d.w.cfg
	faults := slices.Clone(cfg.Faults)
	slices.SortFunc(faults, func(a, b Fault) int { return int(a.At - b.At) })
	type lift struct {
		at   time.Duration
		r    *replica
		kind FaultKind
	}
	var lifts []lift
	restarts := map[int]time.Time{}
	flips, served := slices.Clone(cfg.GadgetFlips), cfg.GadgetsAtStart
	toggles := slices.Clone(cfg.Toggles)
	handoffs := slices.Clone(cfg.Handoffs)
	for now := time.Duration(0); now < cfg.Duration; now = d.w.since() {
		for len(flips) > 0 && flips[0] <= now {
			flips, served = flips[1:], !served
			d.w.serveGadgets(served)
			d.w.disturb("")
		}
		for len(handoffs) > 0 && handoffs[0] <= now {
			handoffs = handoffs[1:]
			holder := d.w.holder(component)
			for _, r := range d.replicas {
				if r.identity == holder && !r.returned() {
					d.disturbed = time.Now()
					d.w.disturb(r.identity)
					d.w.tracef("handoff: SIGTERM to the leader %s", r.identity)
					r.cancel()
				}
			}
		}
		for len(toggles) > 0 && toggles[0].At <= now {
			d.toggle(toggles[0])
			d.w.disturb("")
			toggles = toggles[1:]
		}
		for len(faults) > 0 && faults[0].At <= now {
			f := faults[0]
			faults = faults[1:]
			r := d.replicas[f.Replica]
			d.disturbed = time.Now()
			d.w.disturb(r.identity)
			d.w.tracef("fault: %s on %s for %v", f.Kind, r.identity, f.For)
			switch f.Kind {
			case PartitionHang, PartitionFail, SlowLeases:
				r.setFault(f.Kind, f.Delay, true)
				lifts = append(lifts, lift{now + f.For, r, f.Kind})
			case Terminate:
				r.cancel()
			case Crash:
				r.setFault(Crash, 0, true)
				d.w.crashed(r.identity)
				r.cancel()
			case APIRestart:
				d.w.server.DropWatches()
				d.w.disturb("")
			}
		}
		lifts = slices.DeleteFunc(lifts, func(l lift) bool {
			if l.at > now {
				return false
			}
			l.r.setFault(l.kind, 0, false)
			d.w.disturb(l.r.identity)
			d.w.tracef("fault lifted: %s on %s", l.kind, l.r.identity)
			d.disturbed = time.Now()
			return true
		})
		for i, r := range d.replicas {
			if !r.returned() {
				continue
			}
			if _, ok := restarts[i]; !ok {
				d.check(r)
				restarts[i] = time.Now().Add(restartDelay)
				d.disturbed = time.Now()
			} else if time.Now().After(restarts[i]) {
				delete(restarts, i)
				if err := d.start(i); err != nil {
					d.w.violate("restarting replica %d: %v", i, err)
				}
			}
		}
		if len(lifts) > 0 {
			d.disturbed = time.Now() // a fault in force: nothing is calm
		}
		d.checkReadiness()
		d.w.progressTick(tick, d.reachable)
		if debugStacksAt > 0 && now >= debugStacksAt && now < debugStacksAt+tick {
			buf := make([]byte, 64<<20)
			_ = os.WriteFile(os.Getenv("SIM_DEBUG_STACKS_FILE"), buf[:runtime.Stack(buf, true)], 0o644)
		}
		time.Sleep(tick) // the simulation's own clock: fake time in the bubble
	}
}

// toggle changes the selection of every replica that runs, and of those
// started later. A toggle that names controllers SetControllers must
// refuse (sharded, left to another component) is first asked as is: every
// replica must refuse it whole, naming each of them; then it is asked
// without them. A change SetControllers refuses otherwise is a violation.
func (d *driver) toggle(t Toggle) {
	entries := t.Selection()
	d.w.setSelection(entries)
	for _, r := range d.replicas {
		if r.returned() {
			continue
		}
		if len(t.Refused) > 0 {
			err := r.m.SetControllers(t.Asked())
			for _, name := range t.Refused {
				if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("controller %q cannot be", name)) {
					d.w.violate("%s: SetControllers(%q) = %v, want it refused, naming %s",
						r.identity, t.Asked(), err, name)
				}
			}
		}
		if err := r.m.SetControllers(entries); err != nil {
			d.w.violate("%s: SetControllers(%q): %v", r.identity, entries, err)
		}
	}
}

// reachable reports whether the replica of that identity can reach the
// API server now: it runs, and no partition is in force.
func (d *driver) reachable(identity string) bool {
	for _, r := range d.replicas {
		if r.identity != identity {
			continue
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		return !r.crashed && !(r.faulty && (r.fault == PartitionHang || r.fault == PartitionFail))
	}
	return false
}

// finish stops every replica and waits for each Run, then ends the
// stragglers.
func (d *driver) finish() {
	for _, r := range d.replicas {
		r.cancel()
	}
	for _, r := range d.replicas {
		t := time.NewTimer(runBound)
		select {
		case <-r.done:
			t.Stop()
			d.check(r)
		case <-t.C:
			d.w.violate("%s: Run did not return within %v of being cancelled", r.identity, runBound)
		}
	}
	close(d.w.release)
	d.w.cancelReleased()
	// InitFuncs that ignore their context finish their blocking (3 s at
	// most), then everything of the run can end.
	time.Sleep(10 * time.Second)
}

// check checks a returned Run's error: only controllers that do not stop
// in time may be named as stragglers, and a replica whose controllers all
// stop in time has none.
func (d *driver) check(r *replica) {
	if slices.Contains(d.ended, r) {
		return
	}
	d.ended = append(d.ended, r)
	err := r.err
	for _, m := range stragglers.FindAllStringSubmatch(fmt.Sprint(err), -1) {
		for _, name := range strings.Fields(m[1]) {
			if name == "(InitFunc)" {
				continue
			}
			if s, ok := d.w.specs[name]; ok && s.cooperative() {
				d.w.violate("%s: Run names %s as a straggler, but it stops within its bound: %v",
					r.identity, name, err)
			}
		}
	}
	for _, ce := range controllerErrors(err) {
		if s, ok := d.w.specs[ce.Controller]; ok && s.Init != InitFlaky {
			d.w.violate("%s: Run names %s as failed, but it never fails on its own: %v",
				r.identity, ce.Controller, ce)
		}
	}
	cooperative := true
	for _, s := range d.w.cfg.Controllers {
		cooperative = cooperative && s.cooperative()
	}
	if cooperative && errors.Is(err, manager.ErrShutdownTimeout) && d.w.cfg.StopBudget() > 0 {
		d.w.violate("%s: every controller stops in time, yet Run reports ErrShutdownTimeout: %v",
			r.identity, err)
	}
}

// checkReadiness: once nothing happened for two lease durations, a
// follower that knows the leader is ready. Only where no controller
// misbehaves (never stops, blocks its InitFunc past its bound, fails now
// and then): a term that fails ends its replica's Run, and a replica on its
// way out (its member Leases released, its terms stopping) is not ready.
func (d *driver) checkReadiness() {
	cfg := d.w.cfg
	if time.Since(d.disturbed) < 2*cfg.LeaseDuration || cfg.StopBudget() <= 0 {
		return
	}
	for _, s := range cfg.Controllers {
		if !s.cooperative() || s.Init == InitFlaky {
			return
		}
	}
	holder := d.w.holder(component)
	live := map[string]bool{}
	for _, r := range d.replicas {
		if !r.returned() {
			live[r.identity] = true
		}
	}
	if !live[holder] {
		return
	}
	if d.reported == nil {
		d.reported = map[string]bool{}
	}
	for _, r := range d.replicas {
		if r.returned() || r.identity == holder || d.reported[r.identity] {
			continue
		}
		if seen, _ := r.m.Leader(); seen != holder {
			continue // it does not know the leader (yet): no promise
		}
		rec := httptest.NewRecorder()
		r.m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz?verbose", nil))
		if rec.Code != http.StatusOK {
			d.reported[r.identity] = true
			d.w.violate("%s follows %s, calm for %v, but /readyz is %d:\n%s", r.identity, holder,
				time.Since(d.disturbed).Round(time.Millisecond), rec.Code, rec.Body.String())
		}
	}
}

// controllerErrors finds every *manager.ControllerError in err's tree.
func controllerErrors(err error) []*manager.ControllerError {
	var out []*manager.ControllerError
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if ce, ok := err.(*manager.ControllerError); ok {
			out = append(out, ce)
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}
