package leader

import (
	"fmt"
	"net/http"
	"time"
)

// Watchdog is a health check for /livez or /healthz. It fails while a term
// is running but the lease has not been renewed for LeaseDuration plus
// WatchdogGrace: the replica lost the lease (or its renewals are stuck) and
// its term has not stopped, so it is wedged and should be restarted. It
// returns nil when no term runs, and on a nil Elector.
func (e *Elector) Watchdog(_ *http.Request) error {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	running, last := e.termRunning, e.lastRenew
	e.mu.Unlock()
	if !running {
		return nil
	}
	limit := e.cfg.LeaseDuration + WatchdogGrace
	if since := e.clock.Since(last); since > limit {
		return fmt.Errorf(
			"leader: lock %s: term still running but the lease was last renewed %s ago (limit %s)",
			e.desc,
			since.Round(time.Millisecond),
			limit,
		)
	}
	return nil
}

// Ready is a health check for /readyz: nil while this replica leads, or
// follows a known leader. It fails before the lease was first observed, and
// while no other replica holds the lease.
func (e *Elector) Ready(_ *http.Request) error {
	if e == nil {
		return fmt.Errorf("leader: no elector")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.leading {
		return nil
	}
	if !e.lease.known {
		return fmt.Errorf("leader: lock %s: lease not observed yet", e.desc)
	}
	switch h := e.lease.holder(); h {
	case "":
		return fmt.Errorf("leader: lock %s: no replica holds the lease", e.desc)
	case e.cfg.Identity:
		return fmt.Errorf(
			"leader: lock %s: the lease names this replica, which is not leading",
			e.desc,
		)
	default:
		return nil
	}
}
