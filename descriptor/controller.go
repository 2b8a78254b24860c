package descriptor

import (
	"context"
	"net/http"
)

// InitFunc builds one controller. It is called once per term, after the
// StartFirst controllers run and before the informers start, so it may request
// informers from cc but must not wait for their caches.
//
// Returning (nil, nil) means the controller chose not to start (for example
// because an API it needs is not served); the host logs that and carries on.
// Returning an error stops the term.
type InitFunc func(ctx context.Context, cc Context) (Controller, error)

// Controller is a built controller.
type Controller interface {
	// Run blocks until ctx is done and every goroutine the controller started
	// has ended. The host calls Run exactly once for every Controller an
	// InitFunc returned, even when the term ends before the controller would
	// have started (ctx is then already done), so Run is where to release
	// what the InitFunc acquired, such as a workqueue. A non-nil error before ctx is done is a
	// failure of the
	// controller; the error returned after ctx is done is reported but not
	// treated as a failure.
	Run(ctx context.Context) error
}

// ControllerFunc adapts a function to Controller.
type ControllerFunc func(ctx context.Context) error

// Run calls f(ctx).
func (f ControllerFunc) Run(ctx context.Context) error { return f(ctx) }

// HealthChecker is implemented by controllers that can tell whether they are
// healthy. The host calls HealthCheck for the controller's named check on
// /healthz, /livez and /readyz; a nil error is healthy. It must be safe for
// concurrent use. For a check that belongs on one side only, implement
// ReadinessChecker or LivenessChecker instead (or as well).
type HealthChecker interface {
	HealthCheck(req *http.Request) error
}

// ReadinessChecker is implemented by controllers with a check that matters
// only for readiness, such as "caught up after start": the host runs
// ReadinessCheck for the controller's named check on /readyz only, after
// HealthCheck if the controller also has one, and the check passes when both
// pass. A nil error (or a healthz.Note) is ready. It must be safe for
// concurrent use.
type ReadinessChecker interface {
	ReadinessCheck(req *http.Request) error
}

// LivenessChecker is implemented by controllers with a check that matters
// only for liveness, such as "a worker is wedged": the host runs
// LivenessCheck for the controller's named check on /healthz and /livez
// only, after HealthCheck if the controller also has one, and the check
// passes when both pass. A failing liveness check gets the process
// restarted, so fail it only when a restart would help. It must be safe for
// concurrent use.
type LivenessChecker interface {
	LivenessCheck(req *http.Request) error
}

// Debuggable is implemented by controllers that serve debugging pages. The
// host mounts the handler at /debug/controllers/<name>/ with that prefix
// stripped.
type Debuggable interface {
	DebuggingHandler() http.Handler
}
