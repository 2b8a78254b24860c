package descriptor

import (
	"github.com/ctrlhost/ctrlhost/healthz"
)

// HealthChecks returns the checks a host serves under c's name: live for
// /healthz and /livez, ready for /readyz. Each runs c's HealthCheck, if it
// has one, then its LivenessCheck or ReadinessCheck, and combines them with
// healthz.All: it fails when either fails and otherwise passes, carrying any
// healthz.Note. For a controller with none of these methods both checks
// always pass.
func HealthChecks(c Controller) (live, ready healthz.Checker) {
	var general, liveOnly, readyOnly healthz.Checker
	if hc, ok := c.(HealthChecker); ok {
		general = hc.HealthCheck
	}
	if lc, ok := c.(LivenessChecker); ok {
		liveOnly = lc.LivenessCheck
	}
	if rc, ok := c.(ReadinessChecker); ok {
		readyOnly = rc.ReadinessCheck
	}
	return healthz.All(general, liveOnly), healthz.All(general, readyOnly)
}
