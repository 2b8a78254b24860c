package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/internal/fakeapi"
	"github.com/ctrlhost/ctrlhost/shard"
)

// Names the simulated host uses.
const (
	component      = "sim"
	namespace      = "kube-system"
	migrationLease = "sim-migration"
	shardGroup     = "sim-shard"
	headerReplica  = "X-Sim-Replica"
	headerSent     = "X-Sim-Sent"
)

// Namespaces the controllers write into.
var namespaces = func() []string {
	out := make([]string, 16)
	for i := range out {
		out[i] = fmt.Sprintf("ns-%c%c", 'a'+i, 'q'+(i*7)%9)
	}
	return out
}()

// World is one run: the API server, the replicas, and what the checks saw.
type World struct {
	cfg     Config
	server  *fakeapi.Server
	origin  time.Time
	release chan struct{} // closed when the run ends: stragglers return
	// released ends when release closes: what stragglers' requests use.
	released       context.Context
	cancelReleased context.CancelFunc

	mu         sync.Mutex
	leases     map[string][]leaseState // history per Lease name
	instances  map[string][]*instance  // running and past controller instances, by key
	violations []string
	returned   map[string]time.Time // identity → when its Run returned
	trace      []string
	specs      map[string]ControllerSpec
	applied    map[string]int // ConfigMap writes the server took, by controller
	// gadgetInformers are the Served controllers' informers of gadgets,
	// by cache, with their users: each must stop within informerStopBound
	// of its last user's Run returning.
	gadgetInformers map[cache.Indexer]*gadgetInformer
	// selection is the --controllers list in force (Config.Toggles); nil
	// selects every controller.
	selection []string
}

// gadgetInformer is one informer of gadgets, shared by the Served
// controllers of one term of one replica.
type gadgetInformer struct {
	inf     cache.SharedIndexInformer
	replica string
	holders int       // built controllers whose Run has not returned
	last    string    // the last holder whose Run returned
	at      time.Time // when it did
}

// informerStopBound bounds how long an informer of WhenServed controllers
// may run after the last of them returned: its unit flushes its events
// (one second at most), then releases its informers.
const informerStopBound = 3 * time.Second

// debugLease, when set (by a test being debugged), traces every write of
// that Lease, not only holder changes.
var debugLease = os.Getenv("SIM_DEBUG_LEASE")

// leaseState is a Lease as the server stored it at a moment.
type leaseState struct {
	at       time.Time
	holder   string
	renew    time.Time
	duration time.Duration
}

// instance is one Run of a controller (or a slot's instance of one).
type instance struct {
	replica    string
	start, end time.Time
	crashed    bool // its replica vanished: it stopped then
	// fenced reports whether its term's write gate refuses its writes.
	fenced func() bool
	// overlapped: another replica's instance started while this one ran,
	// fenced; its replica must name it as a straggler.
	overlapped bool
	named      bool
	// useful is how long it ran, before its term told it to stop (told),
	// while its replica reached the API server (sampled every tick); idle
	// instances (no namespace to write in: slots without one) have none.
	useful time.Duration
	idle   bool
	told   bool
}

func newWorld(cfg Config) *World {
	w := &World{
		cfg:       cfg,
		release:   make(chan struct{}),
		server:    fakeapi.New(),
		origin:    time.Now(),
		leases:    map[string][]leaseState{},
		instances: map[string][]*instance{},
		returned:  map[string]time.Time{},
		specs:     map[string]ControllerSpec{},
		applied:   map[string]int{},
	}
	for _, s := range cfg.Controllers {
		w.specs[s.Name] = s
	}
	w.released, w.cancelReleased = context.WithCancel(context.Background())
	w.server.SetHook(w.hook)
	if cfg.GadgetsAtStart {
		w.serveGadgets(true)
	}
	return w
}

// setSelection records the --controllers list in force.
func (w *World) setSelection(entries []string) {
	w.mu.Lock()
	w.selection = slices.Clone(entries)
	w.mu.Unlock()
	w.tracef("controllers: %v", entries)
}

// currentSelection is the --controllers list in force (nil: every one).
func (w *World) currentSelection() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.selection)
}

// serveGadgets installs or removes the gadgets resource, as a CRD's
// creation or deletion would.
func (w *World) serveGadgets(on bool) {
	if on {
		w.server.AddResource(fakeapi.Resource{GVR: gadgetsGVR, Kind: "Gadget", Namespaced: true})
		w.tracef("gadgets served")
		return
	}
	w.server.RemoveResource(gadgetsGVR)
	w.tracef("gadgets removed")
}

func (w *World) since() time.Duration { return time.Since(w.origin).Round(time.Millisecond) }

// tracef adds a line to the run's trace.
func (w *World) tracef(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.trace = append(w.trace, fmt.Sprintf("%9v ", w.since())+fmt.Sprintf(format, args...))
}

// violate records a broken promise.
func (w *World) violate(format string, args ...any) {
	msg := fmt.Sprintf("%v: ", w.since()) + fmt.Sprintf(format, args...)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violations = append(w.violations, msg)
	w.trace = append(w.trace, "VIOLATION "+msg)
}

// ServeHTTP serves the API and records every Lease write the server
// applied, in order, for the fencing check.
func (w *World) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	if !strings.Contains(req.URL.Path, "/leases") || req.Method == http.MethodGet {
		if debugLease != "" && req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/"+debugLease) {
			w.tracef("lease %s: read by %s", debugLease, req.Header.Get(headerReplica))
		}
		w.server.ServeHTTP(rw, req)
		return
	}
	rec := &statusWriter{ResponseWriter: rw}
	w.server.ServeHTTP(rec, req)
	if rec.code < 200 || rec.code >= 300 {
		if debugLease != "" && strings.HasSuffix(req.URL.Path, "/"+debugLease) {
			w.tracef("lease %s: %s by %s failed: %d %s", debugLease, req.Method, req.Header.Get(headerReplica),
				rec.code, rec.body)
		}
		return
	}
	name := req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:]
	if req.Method == http.MethodPost {
		var body struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		_ = json.Unmarshal(rec.body, &body)
		name = body.Metadata.Name
	}
	w.recordLease(name)
}

type statusWriter struct {
	http.ResponseWriter
	code int
	body []byte
}

func (s *statusWriter) WriteHeader(code int) { s.code = code; s.ResponseWriter.WriteHeader(code) }

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	s.body = append(s.body, p...)
	return s.ResponseWriter.Write(p)
}

func (w *World) recordLease(name string) {
	l := w.server.Get(leaseGVR, namespace, name)
	st := leaseState{at: time.Now()}
	if l != nil {
		spec, _ := l["spec"].(map[string]any)
		st.holder, _ = spec["holderIdentity"].(string)
		if s, _ := spec["renewTime"].(string); s != "" {
			st.renew, _ = time.Parse(metav1.RFC3339Micro, s)
		}
		if d, ok := spec["leaseDurationSeconds"].(float64); ok {
			st.duration = time.Duration(d) * time.Second
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.leases[name]
	if len(h) == 0 || h[len(h)-1].holder != st.holder || (debugLease != "" && name == debugLease) {
		w.trace = append(w.trace, fmt.Sprintf("%9v lease %s: holder %q (renewed %v, for %v)", w.since(), name,
			st.holder, st.renew.Sub(w.origin).Round(time.Millisecond), st.duration))
	}
	w.leases[name] = append(h, st)
}

// validAt reports whether identity held Lease name, unexpired, at t, by the
// server's own record.
func (w *World) validAt(name, identity string, t time.Time) (bool, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var last *leaseState
	for i := range w.leases[name] {
		if w.leases[name][i].at.After(t) {
			break
		}
		last = &w.leases[name][i]
	}
	switch {
	case last == nil:
		return false, "the Lease did not exist"
	case last.holder != identity:
		return false, fmt.Sprintf("the Lease was held by %q", last.holder)
	case !t.Before(last.renew.Add(last.duration)):
		return false, fmt.Sprintf("the Lease expired %v before", t.Sub(last.renew.Add(last.duration)))
	}
	return true, ""
}

// leaseOf is the Lease that must be valid for controller's write into ns.
func (w *World) leaseOf(controller, ns string) string {
	s := w.specs[controller]
	switch {
	case s.Migrated:
		return migrationLease
	case s.Sharded:
		slot := shard.Space{Slots: w.cfg.Slots, Keying: shard.ByNamespace}.SlotOfKey(ns)
		return fmt.Sprintf("%s-slot-%d", shardGroup, slot)
	}
	return component
}

// hook checks every write that reaches the server, and answers
// TokenRequests.
func (w *World) hook(rw http.ResponseWriter, r *fakeapi.Request) error {
	if !r.Mutating() {
		return nil
	}
	identity := r.Header.Get(headerReplica)
	sentNanos, _ := strconv.ParseInt(r.Header.Get(headerSent), 10, 64)
	sent := time.Unix(0, sentNanos)
	w.mu.Lock()
	returnedAt, returned := w.returned[identity]
	w.mu.Unlock()
	if returned && sent.After(returnedAt) {
		w.violate("%s wrote (%s %s %s/%s, user agent %q) after its Run returned at %v",
			identity, r.Verb, r.Resource.GVR.Resource, r.Namespace, r.Name, r.UserAgent, returnedAt.Sub(w.origin))
	}
	switch r.Resource.GVR.Resource {
	case "serviceaccounts":
		if r.Subresource == "token" {
			return w.answerToken(rw)
		}
	case "configmaps", "events":
		controller, ns := w.writer(r)
		if _, ok := w.specs[controller]; !ok {
			w.violate("a write of %s %s/%s by %s with user agent %q names no simulated controller",
				r.Resource.GVR.Resource, r.Namespace, r.Name, identity, r.UserAgent)
			return nil
		}
		lease := w.leaseOf(controller, ns)
		if ok, why := w.validAt(lease, identity, sent); !ok {
			w.violate("fencing: %s's %s wrote %s %s/%s sent at %v while it held no valid Lease %s (%s)",
				identity, controller, r.Resource.GVR.Resource, r.Namespace, r.Name, sent.Sub(w.origin), lease, why)
		}
		if r.Resource.GVR.Resource == "configmaps" {
			w.mu.Lock()
			w.applied[controller]++
			w.mu.Unlock()
		}
	}
	return nil
}

// writer is the controller a write belongs to, and the namespace it is
// keyed by: for an event, its source and its object's namespace.
func (w *World) writer(r *fakeapi.Request) (controller, ns string) {
	if r.Resource.GVR.Resource == "events" {
		var ev struct {
			Source struct {
				Component string `json:"component"`
			} `json:"source"`
			InvolvedObject struct {
				Namespace string `json:"namespace"`
			} `json:"involvedObject"`
		}
		_ = json.Unmarshal(r.Body, &ev)
		if ev.Source.Component == "" && r.Name != "" {
			// A patch of a recorded event (aggregation): the stored one
			// tells whose it is.
			if stored := w.server.Get(r.Resource.GVR, r.Namespace, r.Name); stored != nil {
				b, _ := json.Marshal(stored)
				_ = json.Unmarshal(b, &ev)
			}
		}
		if ev.Source.Component != "" {
			return ev.Source.Component, ev.InvolvedObject.Namespace
		}
	}
	return strings.TrimPrefix(r.UserAgent, component+"/"), r.Namespace
}

func (w *World) answerToken(rw http.ResponseWriter) error {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(http.StatusCreated)
	err := json.NewEncoder(rw).Encode(&authenticationv1.TokenRequest{
		TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenRequest"},
		Status: authenticationv1.TokenRequestStatus{Token: "simulated",
			ExpirationTimestamp: metav1.NewTime(time.Now().Add(time.Hour))},
	})
	return errors.Join(fakeapi.ErrAnswered, err)
}

// toldToStop records that the instance's context is done: its term ended.
func (w *World) toldToStop(in *instance) {
	w.mu.Lock()
	defer w.mu.Unlock()
	in.told = true
}

// started records that replica's instance of key began its Run, checking
// that no other replica's instance is running.
func (w *World) started(key, replica string, fenced func() bool, idle bool) *instance {
	in := &instance{replica: replica, start: time.Now(), fenced: fenced, idle: idle}
	w.mu.Lock()
	var others, twins []*instance
	for _, o := range w.instances[key] {
		if o.end.IsZero() && o.replica == replica {
			twins = append(twins, o)
		}
		if o.end.IsZero() && o.replica != replica {
			if o.fenced() {
				// A straggler whose writes are refused: allowed, if its
				// replica names it (checked when the run ends).
				o.overlapped = true
				continue
			}
			others = append(others, o)
		}
	}
	w.instances[key] = append(w.instances[key], in)
	w.trace = append(w.trace, fmt.Sprintf("%9v %s starts %s", w.since(), replica, key))
	w.mu.Unlock()
	for _, o := range others {
		w.violate("overlap: %s started %s while %s's instance (since %v) was still running",
			replica, key, o.replica, o.start.Sub(w.origin))
	}
	for _, o := range twins {
		w.violate("overlap: %s started %s while its own instance (since %v) was still running",
			replica, key, o.start.Sub(w.origin))
	}
	return in
}

// stopped records that an instance's Run returned.
func (w *World) stopped(key string, in *instance) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if in.end.IsZero() {
		in.end = time.Now()
	}
	w.trace = append(w.trace, fmt.Sprintf("%9v %s stops %s", w.since(), in.replica, key))
}

// holdsGadgets records that a Served controller's InitFunc took inf.
func (w *World) holdsGadgets(replica string, inf cache.SharedIndexInformer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gadgetInformers == nil {
		w.gadgetInformers = map[cache.Indexer]*gadgetInformer{}
	}
	g := w.gadgetInformers[inf.GetIndexer()]
	if g == nil {
		g = &gadgetInformer{inf: inf, replica: replica}
		w.gadgetInformers[inf.GetIndexer()] = g
	}
	g.holders++
}

// mustStop records that the Run of a Served controller holding inf
// returned: once none holds it, it must stop within informerStopBound
// (checked every tick by progressTick).
func (w *World) mustStop(key string, inf cache.SharedIndexInformer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := w.gadgetInformers[inf.GetIndexer()]
	if g == nil {
		return // stopped and forgotten already: its term ended first
	}
	g.holders--
	g.last, g.at = key, time.Now()
}

// checkInformersLocked reports informers that outlived their last user;
// w.mu is held. One never started (its term stopped before it could) runs
// nothing, but is watched on: were it started later, nobody holding it, it
// would be a leak.
func (w *World) checkInformersLocked() {
	for idx, g := range w.gadgetInformers {
		switch {
		case g.inf.IsStopped():
			delete(w.gadgetInformers, idx)
		case !hasStarted(g.inf):
		case g.holders == 0 && time.Since(g.at) > informerStopBound:
			msg := fmt.Sprintf("%v: leak: an informer of gadgets on %s still runs %v "+
				"after the Run of its last user (%s) returned", w.since(), g.replica,
				time.Since(g.at).Round(time.Millisecond), g.last)
			w.violations = append(w.violations, msg)
			w.trace = append(w.trace, "VIOLATION "+msg)
			delete(w.gadgetInformers, idx)
		}
	}
}

// crashed ends every running instance of replica: it vanished.
func (w *World) crashed(replica string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ins := range w.instances {
		for _, in := range ins {
			if in.replica == replica && in.end.IsZero() {
				in.end, in.crashed = time.Now(), true
			}
		}
	}
}

// runReturned records when replica's Run returned.
func (w *World) runReturned(replica string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.returned[replica] = time.Now()
}

// abandoned ends the instances of replica that its Run named as
// stragglers: another replica may run them now (their writes are fenced).
func (w *World) abandoned(replica string, names []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, ins := range w.instances {
		name, _, _ := strings.Cut(key, "/")
		for _, in := range ins {
			if in.replica == replica && contains(names, name) && (in.end.IsZero() || in.overlapped) {
				in.named = true
				if in.end.IsZero() {
					in.end = time.Now()
				}
				w.trace = append(w.trace, fmt.Sprintf("%9v %s abandons %s", w.since(), replica, key))
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// progressTick adds dt to the useful time of every running instance that
// has not been told to stop and whose replica reaches the API server
// (reachable). A term's gate that refused writes then would be the host's
// fault, and the progress check would see it.
func (w *World) progressTick(dt time.Duration, reachable func(replica string) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checkInformersLocked()
	for _, ins := range w.instances {
		for _, in := range ins {
			if in.end.IsZero() && !in.idle && !in.told && reachable(in.replica) {
				in.useful += dt
			}
		}
	}
}

// idle reports the controllers that had long chances to write (an
// instance ran ten seconds or more, before it was told to stop, while its
// replica reached the API server) yet never got a write through: a host
// that refuses every write is safe, and broken. Time cut off by a
// partition, or after the term told it to stop (a straggler's writes are
// fenced), does not count.
func (w *World) idle() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for key, ins := range w.instances {
		name, _, _ := strings.Cut(key, "/")
		for _, in := range ins {
			if in.useful >= 10*time.Second && w.applied[name] == 0 && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// unnamed reports the fenced stragglers another instance overlapped whose
// replicas never named them.
func (w *World) unnamed() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for key, ins := range w.instances {
		for _, in := range ins {
			if in.overlapped && !in.named && !in.crashed {
				out = append(out, fmt.Sprintf("%s's %s (since %v)", in.replica, key, in.start.Sub(w.origin)))
			}
		}
	}
	return out
}

// holder is the main Lease's holder as stored now, if it is unexpired.
func (w *World) holder(name string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.leases[name]
	if len(h) == 0 {
		return ""
	}
	last := h[len(h)-1]
	if !time.Now().Before(last.renew.Add(last.duration)) {
		return ""
	}
	return last.holder
}

// hasStarted reports whether inf was started, as client-go's informers
// (and the host's views of them) say; one that cannot say counts as
// started.
func hasStarted(inf cache.SharedIndexInformer) bool {
	s, ok := inf.(interface{ HasStarted() bool })
	return !ok || s.HasStarted()
}
