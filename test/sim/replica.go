package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/fakeapi"
	"github.com/ctrlhost/ctrlhost/leader"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/serving"
	"github.com/ctrlhost/ctrlhost/shard"
)

var leaseGVR = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1",
	Resource: "leases"}

// replica is one process of the simulated host.
type replica struct {
	w        *World
	slot     int // which replica slot of the configuration (its clock)
	identity string
	m        *manager.Manager
	cancel   context.CancelFunc
	done     chan struct{} // closed when Run returned
	err      error
	started  time.Time

	mu      sync.Mutex
	fault   FaultKind
	faulty  bool          // a partition or slow Leases is in force
	delay   time.Duration // SlowLeases
	crashed bool
	changed chan struct{} // closed and replaced when the faults change
}

// stragglers lists the controller instances a Run error names as still
// running: "still running after …: [a b (InitFunc)]".
var stragglers = regexp.MustCompile(`still running after [^:]*: \[([^\]]*)\]`)

// startReplica builds and starts a replica in replica slot i, generation
// gen. A Build error is returned (lease settings past the edge).
func (w *World) startReplica(i, gen int, migrationFile string) (*replica, error) {
	r := &replica{w: w, slot: i, identity: fmt.Sprintf("r%d.%d", i, gen), done: make(chan struct{}),
		changed: make(chan struct{}), started: time.Now()}
	cfg := w.cfg
	opts := manager.Options{
		LeaderElect: true,
		LeaderElection: leader.Config{
			Identity:      r.identity,
			LeaseDuration: cfg.LeaseDuration,
			RenewDeadline: cfg.RenewDeadline,
			RetryPeriod:   cfg.RetryPeriod,
			Clock:         scaledClock{origin: w.origin, scale: cfg.Scale[i]},
		},
		LostLeasePolicy:              cfg.Policy,
		ControllerStartInterval:      cfg.StartInterval,
		ControllerShutdownTimeout:    cfg.ShutdownTimeout,
		WarmStandby:                  cfg.Warm,
		UseServiceAccountCredentials: cfg.Credentials,
		Serving:                      serving.Options{SecurePort: serving.PortDisabled},
		Controllers:                  w.currentSelection(),
	}
	if cfg.Sharding {
		opts.Sharding = shard.Options{Enabled: true, Slots: cfg.Slots}
	}
	if cfg.Migration {
		opts.EnableLeaderMigration = true
		opts.LeaderMigrationConfig = migrationFile
	}
	var ds []descriptor.Descriptor
	for _, s := range cfg.Controllers {
		ds = append(ds, r.descriptor(s))
	}
	m, err := manager.NewBuilder(component).WithRESTConfig(fakeapi.Config(w, r.wrap)).
		WithOptions(opts).WithLogger(logr.Discard()).Register(ds...).Build()
	if err != nil {
		return nil, err
	}
	r.m = m
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	w.tracef("%s starts (clock scale %.4f)", r.identity, cfg.Scale[i])
	w.disturb(r.identity)
	go func() {
		defer close(r.done)
		r.err = m.Run(ctx)
		w.runReturned(r.identity)
		for _, m := range stragglers.FindAllStringSubmatch(fmt.Sprint(r.err), -1) {
			w.abandoned(r.identity, strings.Fields(m[1]))
		}
		w.tracef("%s: Run returned: %v", r.identity, r.err)
	}()
	return r, nil
}

// writeMigrationFile writes a LeaderMigrationConfiguration that migrates
// the configuration's migrated controllers.
func writeMigrationFile(dir string, cfg Config) (string, error) {
	var b strings.Builder
	// KCM's three versions; v1 has no resourceLock field.
	version := []string{"v1alpha1", "v1beta1", "v1"}[cfg.Seed%3]
	fmt.Fprintf(&b, "apiVersion: controllermanager.config.k8s.io/%s\n"+
		"kind: LeaderMigrationConfiguration\nleaderName: %s\n", version, migrationLease)
	if version != "v1" {
		b.WriteString("resourceLock: leases\n")
	}
	b.WriteString("controllerLeaders:\n")
	for _, s := range cfg.Controllers {
		switch {
		case s.Migrated:
			fmt.Fprintf(&b, "- name: %s\n  component: \"*\"\n", s.Name)
		case s.Unowned:
			fmt.Fprintf(&b, "- name: %s\n  component: other-component\n", s.Name)
		}
	}
	path := filepath.Join(dir, "migration.yaml")
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

// wrap is the replica's transport: it stamps every request with the
// replica and the moment it left (below the fence), and applies the
// replica's faults.
func (r *replica) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		req = req.Clone(req.Context())
		req.Header.Set(headerReplica, r.identity)
		req.Header.Set(headerSent, strconv.FormatInt(time.Now().UnixNano(), 10))
		req.Header.Set(headerSeq, strconv.FormatInt(r.w.seq.Add(1), 10))
		r.w.checkGate(r.identity, req)
		if err := r.gate(req); err != nil {
			if req.Body != nil {
				_ = req.Body.Close()
			}
			return nil, err
		}
		resp, err := next.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		resp.Body = &faultyBody{r: r, ctx: req.Context(), ReadCloser: resp.Body}
		if q := req.URL.Query(); q.Get("watch") == "true" || q.Get("watch") == "1" {
			resp.Body = r.w.watchOpened(r.identity, resp.Body)
		}
		return resp, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// errPartitioned is what a request of a replica cut off by PartitionFail
// gets, as from a refused connection.
var errPartitioned = errors.New("dial tcp: connect: connection refused (simulated partition)")

// gate holds or fails a request as the replica's faults say.
func (r *replica) gate(req *http.Request) error {
	for {
		r.mu.Lock()
		crashed, faulty, kind, delay, changed := r.crashed, r.faulty, r.fault, r.delay, r.changed
		r.mu.Unlock()
		switch {
		case crashed || (faulty && kind == PartitionHang):
		case faulty && kind == PartitionFail:
			return errPartitioned
		case faulty && kind == SlowLeases && strings.Contains(req.URL.Path, "/leases") &&
			req.Method != http.MethodGet:
			t := time.NewTimer(delay)
			select {
			case <-t.C:
				return nil
			case <-req.Context().Done():
				t.Stop()
				return req.Context().Err()
			}
		default:
			return nil
		}
		select {
		case <-changed:
		case <-req.Context().Done():
			return req.Context().Err()
		}
	}
}

// faultyBody makes a response body (a watch) go silent while the replica
// is partitioned, as a cut connection would.
type faultyBody struct {
	io.ReadCloser
	r   *replica
	ctx context.Context
}

func (b *faultyBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		if gerr := b.r.gateRead(b.ctx); gerr != nil {
			return 0, gerr
		}
	}
	return n, err
}

// gateRead holds a response's data while the replica is partitioned.
func (r *replica) gateRead(ctx context.Context) error {
	for {
		r.mu.Lock()
		held := r.crashed || (r.faulty && (r.fault == PartitionHang || r.fault == PartitionFail))
		changed := r.changed
		r.mu.Unlock()
		if !held {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// setFault puts a fault in force (on) or lifts it.
func (r *replica) setFault(kind FaultKind, delay time.Duration, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch kind {
	case Crash:
		r.crashed = true
	default:
		r.faulty, r.fault, r.delay = on, kind, delay
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *replica) returned() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}
