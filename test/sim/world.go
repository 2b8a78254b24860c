package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/fence"
	"github.com/ctrlhost/ctrlhost/internal/fakeapi"
	"github.com/ctrlhost/ctrlhost/leader"
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
	headerSeq      = "X-Sim-Seq"
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
	// informers are the informers the controllers' InitFuncs requested,
	// by cache, with their users: each must stop within informerStopBound
	// of its last user's Run returning (or of its request, when no
	// controller that runs holds it).
	informers map[cache.Indexer]*heldInformer
	// selection is the --controllers list in force (Config.Toggles); nil
	// selects every controller.
	selection []string
	// keys follows the keys sent between controllers (Config.Keys).
	keys *keyBook
	// gadgets: the gadgets resource is served now.
	gadgets bool
	// seq orders what happens within one instant of fake time: each
	// request leaving a replica and each Lease write the server applied
	// takes the next number.
	seq atomic.Int64
	// leaseWrites makes each Lease write and its record one step.
	leaseWrites sync.Mutex
	// calm is, by replica identity, when that replica was last disturbed
	// (started, a fault on it began or ended) and, under "", when the
	// cluster was (an API server restart, a change of selection, gadgets
	// installed or removed).
	calm map[string]time.Time
	// watches counts, by replica identity, the watches open now; leaked
	// names the replicas reported for watches open after their Run returned.
	watches map[string]int
	leaked  map[string]bool
}

// The ConfigMap that shows what fields an informer keeps.
const (
	probeNamespace = "sim-probe"
	probeName      = "probe"
)

// heldInformer is one informer the controllers of one term of one replica
// requested, shared by those that hold it.
type heldInformer struct {
	term    *leader.Term // of the controllers that requested it
	shared  bool         // the term's informer of every ConfigMap
	inf     cache.SharedIndexInformer
	replica string
	holders int       // built controllers whose Run has not returned
	last    string    // the last holder whose Run returned
	at      time.Time // when it did
}

// informerStopBound bounds how long an informer may run after the last
// controller holding it returned: a stopped controller's events are
// flushed (one second at most), then its informers released.
const informerStopBound = 3 * time.Second

// debugLease, when set (by a test being debugged), traces every write of
// that Lease, not only holder changes.
var debugLease = os.Getenv("SIM_DEBUG_LEASE")

// leaseState is a Lease as the server stored it at a moment.
type leaseState struct {
	at       time.Time
	seq      int64  // World.seq when it was recorded
	by       string // the replica that wrote it
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
	gate   *fence.Gate // its term's
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
		calm:      map[string]time.Time{},
		watches:   map[string]int{},
		leaked:    map[string]bool{},
	}
	if cfg.Keys {
		w.keys = newKeyBook(w, cfg)
	}
	if len(cfg.Initial) > 0 {
		w.selection = Toggle{Off: cfg.Initial}.Selection()
	}
	for _, s := range cfg.Controllers {
		w.specs[s.Name] = s
	}
	w.released, w.cancelReleased = context.WithCancel(context.Background())
	w.server.SetHook(w.hook)
	if cfg.GadgetsAtStart {
		w.serveGadgets(true)
	}
	// The probe shows which fields an informer of ConfigMaps keeps: data,
	// binaryData, or neither (metadata only).
	probe := map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": probeName, "namespace": probeNamespace},
		"data":     map[string]any{"probe": "1"}, "binaryData": map[string]any{"probe": "AQ=="}}
	if err := w.server.Create(configMapsGVR, probe); err != nil {
		w.violate("creating the probe ConfigMap: %v", err)
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
	w.mu.Lock()
	w.gadgets = on
	w.mu.Unlock()
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

// StacksFile, when set, is where violate writes every goroutine's stack
// at each violation (the test's -sim.stacks): what a replica's
// goroutines were blocked on when a promise broke, which the trace cannot
// show. Replay the seed alone (-test.parallel=1) so that the dump is of
// its bubble only.
var StacksFile string

// violate records a broken promise.
func (w *World) violate(format string, args ...any) {
	msg := fmt.Sprintf("%v: ", w.since()) + fmt.Sprintf(format, args...)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violations = append(w.violations, msg)
	w.trace = append(w.trace, "VIOLATION "+msg)
	if StacksFile != "" {
		buf := make([]byte, 64<<20)
		n := runtime.Stack(buf, true)
		if err := os.WriteFile(StacksFile, buf[:n], 0o644); err != nil {
			w.trace = append(w.trace, "writing the stacks: "+err.Error())
		}
	}
}

// ServeHTTP serves the API and records every Lease write the server
// applied, in order, for the fencing check.
//
// A Lease write and its record are one step (leaseWrites): the record is
// what that write stored, read from the server's answer, and it is taken
// before another Lease write is applied and before the writer hears the
// answer. Otherwise a replica that saw the write's watch event, or the
// writer itself reading the answer, could write again in between, and the
// record would hold the earlier state after the later one.
func (w *World) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	w.checkList(req)
	if !strings.Contains(req.URL.Path, "/leases") || req.Method == http.MethodGet {
		if debugLease != "" && req.Method == http.MethodGet &&
			strings.HasSuffix(req.URL.Path, "/"+debugLease) {
			w.tracef("lease %s: read by %s", debugLease, req.Header.Get(headerReplica))
		}
		w.server.ServeHTTP(rw, req)
		return
	}
	by := req.Header.Get(headerReplica)
	answer := httptest.NewRecorder()
	w.leaseWrites.Lock()
	w.server.ServeHTTP(answer, req)
	if answer.Code >= 200 && answer.Code < 300 {
		w.recordLease(req, answer.Body.Bytes(), by)
	} else if debugLease != "" && strings.HasSuffix(req.URL.Path, "/"+debugLease) {
		w.tracef("lease %s: %s by %s failed: %d %s", debugLease, req.Method, by, answer.Code,
			answer.Body)
	}
	w.leaseWrites.Unlock()
	maps.Copy(rw.Header(), answer.Header())
	rw.WriteHeader(answer.Code)
	_, _ = rw.Write(answer.Body.Bytes())
}

// recordLease records the Lease that a write by replica by stored, as the
// server answered it (a deletion records no holder).
func (w *World) recordLease(req *http.Request, answer []byte, by string) {
	name := req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:]
	st := leaseState{at: time.Now(), seq: w.seq.Add(1), by: by}
	if req.Method != http.MethodDelete {
		var l coordinationv1.Lease
		_ = json.Unmarshal(answer, &l)
		name = l.Name
		st.holder = ptr.Deref(l.Spec.HolderIdentity, "")
		if l.Spec.RenewTime != nil {
			st.renew = l.Spec.RenewTime.Time
		}
		st.duration = time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.leases[name]
	if len(h) == 0 || h[len(h)-1].holder != st.holder || (debugLease != "" && name == debugLease) {
		w.trace = append(w.trace, fmt.Sprintf("%9v lease %s: holder %q (renewed %v, for %v) by %s",
			w.since(), name, st.holder, st.renew.Sub(w.origin).Round(time.Millisecond), st.duration,
			by))
	}
	w.leases[name] = append(h, st)
}

// validAt reports whether identity held Lease name, unexpired, when a
// request left at t, numbered seq (World.seq), by the server's own record:
// the Lease writes recorded before seq count.
func (w *World) validAt(name, identity string, t time.Time, seq int64) (bool, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var last *leaseState
	for i := range w.leases[name] {
		if w.leases[name][i].seq > seq {
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
		return slotLease(slot)
	}
	return component
}

func slotLease(slot int) string { return fmt.Sprintf("%s-slot-%d", shardGroup, slot) }

// leasesOf are the Leases under which controller may mint its
// ServiceAccount's tokens: its lease, or, sharded, any slot's.
func (w *World) leasesOf(controller string) []string {
	if !w.specs[controller].Sharded {
		return []string{w.leaseOf(controller, "")}
	}
	var out []string
	for slot := range w.cfg.Slots {
		out = append(out, slotLease(slot))
	}
	return out
}

// releasedBy reports whether identity, having held Lease name, released
// it (wrote it with no holder) since it last held it: a write of it that
// the server applies now comes after its release.
func (w *World) releasedBy(name, identity string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.leases[name]
	for i := len(h) - 1; i >= 0; i-- {
		switch {
		case h[i].holder == identity:
			return false
		case h[i].holder == "" && h[i].by == identity:
			return true
		}
	}
	return false
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
	seq, _ := strconv.ParseInt(r.Header.Get(headerSeq), 10, 64)
	w.mu.Lock()
	returnedAt, returned := w.returned[identity]
	w.mu.Unlock()
	if returned && sent.After(returnedAt) {
		w.violate("%s wrote (%s %s %s/%s, user agent %q) after its Run returned at %v",
			identity, r.Verb, r.Resource.GVR.Resource, r.Namespace, r.Name, r.UserAgent,
			returnedAt.Sub(w.origin))
	}
	switch r.Resource.GVR.Resource {
	case "serviceaccounts":
		// Minting a controller's ServiceAccount token (creating the
		// ServiceAccount, requesting the token) is a write of its term.
		controller := r.Name
		if r.Subresource == "" {
			var sa struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			}
			_ = json.Unmarshal(r.Body, &sa)
			controller = sa.Metadata.Name
		}
		w.checkWrite(identity, controller, w.leasesOf(controller), sent, seq,
			fmt.Sprintf("%s serviceaccounts %s/%s", r.Subresource, r.Namespace, r.Name))
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
		w.checkWrite(identity, controller, []string{w.leaseOf(controller, ns)}, sent, seq,
			fmt.Sprintf("%s %s/%s", r.Resource.GVR.Resource, r.Namespace, r.Name))
		if r.Resource.GVR.Resource == "configmaps" {
			w.mu.Lock()
			w.applied[controller]++
			w.mu.Unlock()
		}
	}
	return nil
}

// checkWrite checks a controller's write the server is about to apply:
// when it left its replica, the replica held one of leases, valid; and
// the replica has not released that lease since (a write applied after
// the release may follow another replica's first write).
func (w *World) checkWrite(identity, controller string, leases []string, sent time.Time,
	seq int64, what string) {
	if _, ok := w.specs[controller]; !ok {
		w.violate("a write (%s) by %s names no simulated controller", what, identity)
		return
	}
	var why []string
	valid := ""
	for _, lease := range leases {
		ok, reason := w.validAt(lease, identity, sent, seq)
		if ok {
			valid = lease
			break
		}
		why = append(why, lease+": "+reason)
	}
	if valid == "" {
		w.violate("fencing: %s's %s wrote (%s) sent at %v while it held no valid Lease (%s)",
			identity, controller, what, sent.Sub(w.origin), strings.Join(why, "; "))
		return
	}
	if w.releasedBy(valid, identity) {
		w.violate("fencing: %s's %s wrote (%s), sent at %v, applied after %s released Lease %s",
			identity, controller, what, sent.Sub(w.origin), identity, valid)
	}
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

// holds records that a controller's InitFunc requested inf: held, it
// holds it until its Run returns (mustStop); not held (its InitFunc
// declined), it counts for nothing, and an informer no controller holds
// must stop within informerStopBound.
func (w *World) holds(replica, key string, inf cache.SharedIndexInformer, held bool,
	term *leader.Term, shared bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.informers == nil {
		w.informers = map[cache.Indexer]*heldInformer{}
	}
	g := w.informers[inf.GetIndexer()]
	if g == nil {
		g = &heldInformer{inf: inf, replica: replica, at: time.Now(), last: key, term: term,
			shared: shared}
		w.informers[inf.GetIndexer()] = g
	}
	if held {
		g.holders++
	} else if g.holders == 0 {
		g.last, g.at = key, time.Now()
	}
}

// mustStop records that the Run of a controller holding inf returned: once
// none holds it, it must stop within informerStopBound (checked every tick
// by progressTick).
func (w *World) mustStop(key string, inf cache.SharedIndexInformer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := w.informers[inf.GetIndexer()]
	if g == nil {
		return // stopped and forgotten already: its term ended first
	}
	g.holders--
	g.last, g.at = key, time.Now()
}

// checkInformersLocked reports informers that outlived their last user;
// w.mu is held. One never started (its term stopped before it could, or
// the host let go of it before it started) runs nothing, but is watched
// on: were it started later, nobody holding it, it would be a leak.
func (w *World) checkInformersLocked() {
	for idx, g := range w.informers {
		switch {
		case g.inf.IsStopped():
			delete(w.informers, idx)
		case !hasStarted(g.inf):
		case g.holders == 0 && time.Since(g.at) > informerStopBound:
			msg := fmt.Sprintf("%v: leak: an informer on %s still runs %v "+
				"after the Run of its last user (%s) returned", w.since(), g.replica,
				time.Since(g.at).Round(time.Millisecond), g.last)
			w.violations = append(w.violations, msg)
			w.trace = append(w.trace, "VIOLATION "+msg)
			delete(w.informers, idx)
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
	w.checkWatchesLocked()
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
// (and the host's views of them) say, looking through client-go's typed
// wrappers (the generated accessors wrap an informer in one that embeds
// it); one that cannot say counts as started.
func hasStarted(inf cache.SharedIndexInformer) bool {
	if s, ok := inf.(interface{ HasStarted() bool }); ok {
		return s.HasStarted()
	}
	v := reflect.ValueOf(inf)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		v = v.Elem()
	}
	if v.Kind() == reflect.Struct {
		if f := v.FieldByName("SharedIndexInformer"); f.IsValid() && f.CanInterface() {
			if inner, ok := f.Interface().(cache.SharedIndexInformer); ok && inner != nil {
				return hasStarted(inner)
			}
		}
	}
	return true
}

// disturb records that something happened to replica identity ("": to the
// whole cluster) now: the moment calm is measured from.
func (w *World) disturb(identity string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calm[identity] = time.Now()
}

// checkList checks, under warm standby, that a replica that takes the main
// lease over in calm (nothing happened to it or to the cluster for two
// seconds before) lists no ConfigMaps in its term's first second: its
// term adopts the warm set, whose informer of ConfigMaps was listed long
// before and covers every controller of the term. Seeds with migration or
// sharding are left out: their migration and slot terms make informer
// sets of their own when the main lease is taken.
func (w *World) checkList(req *http.Request) {
	cfg := w.cfg
	q := req.URL.Query()
	// A list, or a watch that streams the initial list (client-go's
	// informers list so where the server offers it).
	watch := q.Get("watch") == "true" || q.Get("watch") == "1"
	listing := !watch || q.Get("sendInitialEvents") == "true"
	if !cfg.Warm || cfg.Migration || cfg.Sharding || req.Method != http.MethodGet ||
		req.URL.Path != "/api/v1/configmaps" || !listing || // the warm informer is cluster-wide
		q.Get("labelSelector") != "" || q.Get("fieldSelector") != "" {
		return
	}
	identity := req.Header.Get(headerReplica)
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	var acquired time.Time
	h := w.leases[component]
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].holder != identity {
			break
		}
		acquired = h[i].at
	}
	if acquired.IsZero() || now.Sub(acquired) > time.Second {
		return
	}
	calm := w.calm[identity]
	if w.calm[""].After(calm) {
		calm = w.calm[""]
	}
	if acquired.Sub(calm) < 2*time.Second || !w.warmConfigMapsLocked() {
		return
	}
	msg := fmt.Sprintf("%v: warm standby: %s listed ConfigMaps %v after taking the lease "+
		"over in calm: its term did not adopt the warm informer", w.since(), identity,
		now.Sub(acquired).Round(time.Millisecond))
	w.violations = append(w.violations, msg)
	w.trace = append(w.trace, "VIOLATION "+msg)
}

// warmConfigMapsLocked reports whether a warm set made now keeps an
// informer of every ConfigMap: a controller that would run (selected, its
// resources served) declares it; w.mu is held.
func (w *World) warmConfigMapsLocked() bool {
	for _, s := range w.cfg.Controllers {
		off := slices.Contains(w.selection, "-"+s.Name)
		if s.Reads != ReadsUndeclared && !off && !s.Unowned && (!s.Served || w.gadgets) {
			return true
		}
	}
	return false
}

// watchOpened counts a watch of identity open until its body is closed.
func (w *World) watchOpened(identity string, body io.ReadCloser) io.ReadCloser {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.watches[identity]++
	return &countedBody{ReadCloser: body, close: func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.watches[identity]--
	}}
}

type countedBody struct {
	io.ReadCloser
	once  sync.Once
	close func()
}

func (b *countedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.close)
	return err
}

// watchLeakBound is how long after a replica's Run returned a watch of it
// may stay open: none should.
const watchLeakBound = time.Second

// checkWatchesLocked reports replicas whose Run returned with watches
// still open (held by nobody); w.mu is held.
func (w *World) checkWatchesLocked() {
	for identity, at := range w.returned {
		if w.watches[identity] > 0 && time.Since(at) > watchLeakBound && !w.leaked[identity] {
			w.leaked[identity] = true
			msg := fmt.Sprintf("%v: leak: %s has %d watches open %v after its Run returned",
				w.since(), identity, w.watches[identity], time.Since(at).Round(time.Millisecond))
			w.violations = append(w.violations, msg)
			w.trace = append(w.trace, "VIOLATION "+msg)
		}
	}
}

// keeps reports what an informer of every ConfigMap keeps, from the probe
// in its cache; false when it cannot tell (not synced yet).
func keeps(inf cache.SharedIndexInformer) (k ReadKind, ok bool) {
	if !inf.HasSynced() {
		return 0, false
	}
	obj, found, err := inf.GetStore().GetByKey(probeNamespace + "/" + probeName)
	cm, isCM := obj.(*corev1.ConfigMap)
	switch {
	case err != nil || !found || !isCM:
		return 0, false
	case len(cm.BinaryData) > 0:
		return ReadsWhole, true
	case len(cm.Data) > 0:
		return ReadsData, true
	}
	return ReadsMetadata, true
}

// covers reports whether an informer that keeps k serves a reader of r.
func covers(k, r ReadKind) bool {
	switch r {
	case ReadsMetadata:
		return true
	case ReadsData:
		return k == ReadsData || k == ReadsWhole
	}
	return k == ReadsWhole
}

// checkShared checks, when a controller of replica's term got inf (its
// informer of every ConfigMap) to hold, that no other informer of the
// term held and synced then keeps every field it reads (spec.Reads): the
// host must have handed it that one instead of a second LIST and cache.
func (w *World) checkShared(replica string, term *leader.Term, s ControllerSpec,
	inf cache.SharedIndexInformer) {
	w.mu.Lock()
	if g := w.informers[inf.GetIndexer()]; g != nil && g.holders > 0 {
		// Another built controller holds it already: not one of its own
		// (a wider variant made for that controller serves it too).
		w.mu.Unlock()
		return
	}
	var others []*heldInformer
	for idx, g := range w.informers {
		if idx != inf.GetIndexer() && g.shared && g.term == term && g.replica == replica &&
			g.holders > 0 && !g.inf.IsStopped() {
			others = append(others, g)
		}
	}
	w.mu.Unlock()
	if k, ok := keeps(inf); ok && covers(k, s.Reads) {
		return // it got one that serves it; whether it is the only one is not its business
	}
	for _, g := range others {
		if k, ok := keeps(g.inf); ok && covers(k, s.Reads) {
			w.violate("%s's %s (reads %v) got an informer of ConfigMaps of its own, although "+
				"one the term ran (keeping %v, held by %s) serves it: a second LIST and cache",
				replica, s.Name, s.Reads, k, g.last)
			return
		}
	}
}

// checkGate checks a request as it leaves replica (below the fence): a
// write of a controller (its objects, by its user agent; its
// ServiceAccount and tokens, by name) must not leave while the gate of its
// running instance's term is shut on its deadline (the lease not renewed
// in time). Time stands still within an instant, so the gate that let the
// write through (or a fence that should have) says the same now. A gate
// closed for another reason (the lease lost, the term ended) may have
// closed after the write passed it, within the instant: not checked here
// (the Lease check is).
func (w *World) checkGate(replica string, req *http.Request) {
	if !fence.Mutating(req.Method) {
		return
	}
	var controller string
	switch path := req.URL.Path; {
	case strings.Contains(path, "/serviceaccounts"):
		parts := strings.Split(path, "/")
		if i := slices.Index(parts, "serviceaccounts"); i >= 0 && i+1 < len(parts) {
			controller = parts[i+1]
		} else if req.GetBody != nil {
			if b, err := req.GetBody(); err == nil {
				var sa struct {
					Metadata metav1.ObjectMeta `json:"metadata"`
				}
				_ = json.NewDecoder(b).Decode(&sa)
				controller = sa.Metadata.Name
			}
		}
	case strings.HasSuffix(path, "/configmaps") || strings.Contains(path, "/configmaps/"):
		controller = strings.TrimPrefix(req.UserAgent(), component+"/")
	default:
		return
	}
	spec, ok := w.specs[controller]
	if !ok || spec.Sharded {
		return // a sharded controller's instances run under the gates of many slots
	}
	w.mu.Lock()
	var gates []*fence.Gate
	for _, in := range w.instances[controller] {
		if in.replica == replica && in.end.IsZero() && in.gate != nil {
			gates = append(gates, in.gate)
		}
	}
	w.mu.Unlock()
	for _, g := range gates {
		var fe *fence.Error
		if err := g.Check(controller); errors.As(err, &fe) &&
			strings.HasPrefix(fe.Reason, "the lease has not been renewed in time") {
			w.violate("fencing: %s's %s sent %s %s while its term's gate was shut: %v",
				replica, controller, req.Method, req.URL.Path, err)
			return
		}
	}
}
