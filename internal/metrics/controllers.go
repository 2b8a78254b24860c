package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Controllers holds the metrics a Manager keeps about its controllers,
// each named <namespace>_<name>, where namespace is Namespace(component):
//
//	controller_started_total{controller}  counter: times Run was called
//	controller_running{controller}        gauge: Run calls that have not returned (1 while running;
//
// a sharded controller runs once per slot held)
//
//	controller_panics_total{controller}   counter: panics recovered in its InitFunc or Run
//	controller_failures_total{controller} counter: InitFunc or Run errors (and panics, if reported)
//	controller_health_check{controller}   gauge: 1 last check passed (healthz.Passed: a Note
//
// passes), 0 failed
//
//	informers_synced{term}                gauge: 1 once the term's informers synced
//	shard_slot_held{group,slot}           gauge: 1 while this replica works the slot of the sharded
//
// group
//
// The started, running, panics and failures series of a controller exist at
// zero from the moment Init names it, so a host calls Init with every
// registered controller right after NewControllers; without Init a series
// appears only when something first happens to it.
//
// Unlike the client-go series they belong to this value, not the process.
// Methods are safe for concurrent use. A nil *Controllers ignores every
// call, so code paths without metrics need no checks.
type Controllers struct {
	started  *prometheus.CounterVec
	running  *prometheus.GaugeVec
	panics   *prometheus.CounterVec
	failures *prometheus.CounterVec
	health   *prometheus.GaugeVec
	synced   *prometheus.GaugeVec
	slots    *prometheus.GaugeVec
}

// NewControllers returns the controller metrics of the named component (the
// name given to manager.NewBuilder), prefixed with Namespace(component):
// NewControllers("my-controller-manager") names
// my_controller_manager_controller_started_total and so on. An empty
// component leaves the names unprefixed. Nothing is registered until
// Register.
func NewControllers(component string) *Controllers {
	ns := Namespace(component)
	counter := func(name, help string, label string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(
			prometheus.CounterOpts{Namespace: ns, Name: name, Help: help},
			[]string{label},
		)
	}
	gauge := func(name, help string, label string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(
			prometheus.GaugeOpts{Namespace: ns, Name: name, Help: help},
			[]string{label},
		)
	}
	return &Controllers{
		started: counter(
			"controller_started_total",
			"Number of times a controller was started (its Run called), by controller.",
			"controller",
		),
		running: gauge(
			"controller_running",
			"Number of a controller's Run calls that have not returned: 1 while it runs, 0 when not; a "+
				"sharded controller runs once per slot held.",
			"controller",
		),
		panics: counter(
			"controller_panics_total",
			"Number of panics recovered in a controller's InitFunc or Run, by controller.",
			"controller",
		),
		failures: counter(
			"controller_failures_total",
			"Number of times a controller failed: its InitFunc or Run returned an error or panicked.",
			"controller",
		),
		health: gauge("controller_health_check",
			"Result of a controller's last health check: 1 passed, 0 failed.", "controller"),
		synced: gauge("informers_synced",
			"Whether the informers of a term have synced: 1 synced, 0 not (yet).", "term"),
		slots: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "shard_slot_held",
			Help: "Whether this replica works a slot of a sharded group: 1 while its term runs, else 0."},
			[]string{"group", "slot"}),
	}
}

func (c *Controllers) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		c.started,
		c.running,
		c.panics,
		c.failures,
		c.health,
		c.synced,
		c.slots,
	}
}

// Register adds the metrics to reg. Registering again in the same registry
// is a no-op; registering in several registries is allowed. The error
// names each metric reg already holds from elsewhere (for example another
// Controllers with the same namespace).
func (c *Controllers) Register(reg prometheus.Registerer) error {
	if c == nil {
		return nil
	}
	return register(reg, c.collectors()...)
}

// Started records that the controller's Run is being called: it counts a
// start and one more Run running.
func (c *Controllers) Started(controller string) {
	if c == nil {
		return
	}
	c.started.WithLabelValues(controller).Inc()
	c.running.WithLabelValues(controller).Inc()
}

// Stopped records that a Run call Started counted has returned.
func (c *Controllers) Stopped(controller string) {
	if c == nil {
		return
	}
	c.running.WithLabelValues(controller).Dec()
}

// Panicked counts a recovered panic. It does not count a failure; call
// Failed too when the panic ends the controller.
func (c *Controllers) Panicked(controller string) {
	if c == nil {
		return
	}
	c.panics.WithLabelValues(controller).Inc()
}

// Failed counts a failure of the controller's InitFunc or Run.
func (c *Controllers) Failed(controller string) {
	if c == nil {
		return
	}
	c.failures.WithLabelValues(controller).Inc()
}

// HealthCheck records whether the controller's health check passed. Pass
// healthz.Passed(err), not err == nil: a check that returns a healthz.Note
// passes (/readyz?verbose shows it as "[+]name ok: …").
func (c *Controllers) HealthCheck(controller string, ok bool) {
	if c == nil {
		return
	}
	c.health.WithLabelValues(controller).Set(boolValue(ok))
}

// InformersSynced records whether the informers of the named term (for
// example "main" or "migration") have synced.
func (c *Controllers) InformersSynced(term string, synced bool) {
	if c == nil {
		return
	}
	c.synced.WithLabelValues(term).Set(boolValue(synced))
}

// SlotHeld records whether this replica works slot of the sharded group.
func (c *Controllers) SlotHeld(group string, slot int, held bool) {
	if c == nil {
		return
	}
	c.slots.WithLabelValues(group, strconv.Itoa(slot)).Set(boolValue(held))
}

// Init creates every series of the named controllers at their zero value
// (started 0, running 0, panics 0, failures 0), so they are scraped before
// anything happens to them and rate() sees their first increment. Health is
// left unset until a check runs.
func (c *Controllers) Init(controllers ...string) {
	if c == nil {
		return
	}
	for _, n := range controllers {
		c.started.WithLabelValues(n)
		c.running.WithLabelValues(n).Set(0)
		c.panics.WithLabelValues(n)
		c.failures.WithLabelValues(n)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
