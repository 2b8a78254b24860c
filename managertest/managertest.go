// Package managertest runs a manager.Manager in a unit test, over one of
// two backends:
//
//   - NewAPI: an in-memory API server (Harness.API) that every client of
//     the Manager, typed, dynamic or metadata, reaches over HTTP
//     in-process. It is held to the same contract table as kube-apiserver
//     (docs/testing.md shows it): resourceVersions and 409 conflicts, the
//     status subresource apart, generation per resource, finalizers,
//     strategic merge and server-side apply as the API server does them,
//     no write for a no-op, watches with selectors, namespaces and
//     TokenRequests, and a clear error for what it does not model. Use it
//     for operators, for custom resources, and for any controller whose
//     correctness depends on resourceVersions, conflicts or what the API
//     server does on a write.
//   - New: client-go's fake clientsets (typed and metadata, one object
//     store). Fast, with reactors for fault injection and Client.Actions
//     to assert on, but not an API server: resourceVersions are not set or
//     checked, so a stale update silently wins, there is no status
//     subresource, no generation, no finalizers, no server-side apply
//     field ownership, and workloop's staleness guard is inert (it has no
//     resourceVersions to compare). For controllers of built-in resources
//     that need none of that, and for tests that assert on the requests a
//     controller makes.
//
// Guarantees: Start fails the test on a Build error; the Manager is stopped
// and waited for when the test ends; every wait (including Stop and Err)
// has a deadline and fails the test, naming what it waited for, when the
// deadline passes. The typed fake and the metadata client share one object
// store, so objects seeded with New or written through Client are seen by
// typed and metadata informers alike. Share and SameAPI join harnesses made
// the same way (both New, or both NewAPI), and fail the test otherwise. The
// Manager's logger writes to t.Log.
//
// Non-guarantees: neither backend runs admission, RBAC or garbage
// collection; use testenv for that. klog, which
// client-go logs through, is not routed to t.Log: klog is process-global, so
// routing it from one test would send other tests' (and parallel tests')
// output there, and a client-go goroutine logging after the test ended would
// make t.Log panic. klog keeps writing to stderr.
package managertest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/leader"
	"github.com/ctrlhost/ctrlhost/leader/leadertest"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/serving"
	"github.com/ctrlhost/ctrlhost/shard"
)

// DefaultTimeout bounds every wait of a Harness.
const DefaultTimeout = poll.Timeout

// Harness builds and runs one Manager over fake clients.
type Harness struct {
	T testing.TB
	// Client is the typed fake every controller and informer uses. Start
	// hands it to the Builder; replace it before Start to use another.
	Client *fake.Clientset
	// Metadata is the metadata client. New sets it to NewMetadataClient(Client),
	// which shares Client's objects; Start hands it to the Builder, so a
	// replacement set before Start is the one the Manager uses.
	Metadata metadata.Interface
	// Builder may be changed before Start (Register, WithFeatureGate,
	// WithLogger, …). It logs to t.Log by default. Start overrides its
	// clients with Client and Metadata.
	Builder *manager.Builder
	// Options are passed to the Builder by Start. New sets
	// Serving.SecurePort to serving.PortDisabled (no listener); use Get,
	// which calls Manager.Handler, or set serving.PortEphemeral to serve
	// HTTPS on a free port (Manager.ServingAddr tells which).
	Options manager.Options
	// Timeout bounds each wait. Default: DefaultTimeout.
	Timeout time.Duration
	// API is the in-memory API server of a Harness made with NewAPI; nil
	// for one made with New (fake clientsets).
	API *API

	// Manager is set by Start.
	Manager *manager.Manager

	cancel context.CancelFunc
	done   chan struct{}
	err    error

	watches *openWatches // New's clientset's, by resource
}

// openWatches counts the watches of a fake clientset open per resource.
type openWatches struct {
	mu sync.Mutex
	n  map[string]int
}

// count counts w as open for resource until it is stopped.
func (o *openWatches) count(resource string, w watch.Interface) watch.Interface {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n[resource]++
	return &countedWatch{Interface: w, stop: func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.n[resource]--
	}}
}

func (o *openWatches) open(resource string) int {
	if o == nil {
		return 0
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[resource]
}

// countedWatch calls stop once, when it is stopped.
type countedWatch struct {
	watch.Interface
	once sync.Once
	stop func()
}

func (c *countedWatch) Stop() {
	c.once.Do(c.stop)
	c.Interface.Stop()
}

// New returns a Harness for the given component whose fake clientset holds
// objects and whose Builder has ds registered.
func New(
	t testing.TB,
	component string,
	ds []descriptor.Descriptor,
	objects ...runtime.Object,
) *Harness {
	t.Helper()
	client := fake.NewClientset(objects...)
	tracker := client.Tracker()
	h := &Harness{watches: &openWatches{n: map[string]int{}}}
	client.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		w, err := tracker.Watch(action.GetResource(), action.GetNamespace(), listOptions(action))
		if err != nil {
			return true, nil, err
		}
		return true, h.watches.count(action.GetResource().Resource, copying(w)), nil
	})
	*h = Harness{
		T:        t,
		Client:   client,
		Metadata: NewMetadataClient(client),
		Builder: manager.NewBuilder(component).
			Register(ds...).
			WithLogger(testr.NewWithInterface(t, testr.Options{})),
		Options: manager.Options{Serving: serving.Options{SecurePort: serving.PortDisabled}},
		Timeout: DefaultTimeout,
		watches: h.watches,
	}
	return h
}

// Watches returns how many watches of resource (a plural name, as
// "configmaps") the fake clientset of New has open. A test that writes
// right after its controllers started waits for their watch first: the
// fake tracker, unlike an API server, does not replay what happened
// between an informer's LIST and the WATCH that follows it, so a write in
// that window is never seen.
func (h *Harness) Watches(resource string) int { return h.watches.open(resource) }

// Share makes h use other's backend, so that several Managers (for
// example replicas competing for a lease) see one API: other's fake
// clients (New), or other's in-memory API server (NewAPI; h.API is then
// other.API, and h's own is dropped). h must be made the way other was.
func (h *Harness) Share(other *Harness) *Harness {
	h.T.Helper()
	h.sameBackend(other, "Share")
	if other.API != nil {
		h.API = other.API
		return h
	}
	h.Client, h.Metadata = other.Client, other.Metadata
	return h
}

// sameBackend fails the test when h and other were made by different
// constructors: a Manager over fake clientsets and one over the in-memory
// API server cannot see each other's objects.
func (h *Harness) sameBackend(other *Harness, method string) {
	h.T.Helper()
	if (h.API == nil) != (other.API == nil) {
		h.T.Fatalf("managertest: %s of a harness made with New and one made with NewAPI: "+
			"they cannot share an API; make both with NewAPI (then Share) or both with New", method)
	}
}

// SameAPI gives h a fake clientset of its own over other's objects (and a
// metadata client over it), so that replicas share one API while their
// requests can be told apart, for example by reactors on h.Client. On
// harnesses made with NewAPI it is Share: their requests are told apart
// by their user agents (API.Refuse sees them).
func (h *Harness) SameAPI(other *Harness) *Harness {
	h.T.Helper()
	h.sameBackend(other, "SameAPI")
	if other.API != nil {
		h.API = other.API
		return h
	}
	tracker := other.Client.Tracker()
	// A fake clientset of NewClientset (for its discovery client), with
	// its own tracker's reactors replaced by other's tracker.
	cs := fake.NewClientset()
	cs.ReactionChain, cs.WatchReactionChain = nil, nil
	cs.AddReactor("*", "*", k8stesting.ObjectReaction(tracker))
	cs.AddWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		w, err := tracker.Watch(action.GetResource(), action.GetNamespace(), listOptions(action))
		if err != nil {
			return true, nil, err
		}
		return true, copying(w), nil
	})
	h.Client, h.Metadata = cs, NewMetadataClient(cs)
	return h
}

// ShardedAlone sets h up as the only replica of a sharded host: leader
// election on (as identity, with short durations that still leave a loaded
// 2-core machine under -race its renewals), --enable-sharding with slots
// slots, and Lease writes that honour resourceVersions, as an API server's
// do. Call it before Start; the replica then holds every slot, each slot
// term with its own instance of every sharded controller.
func (h *Harness) ShardedAlone(identity string, slots int) *Harness {
	if h.Client != nil {
		leadertest.EnforceResourceVersion(h.Client)
	}
	h.Options.LeaderElect = true
	h.Options.LeaderElection = leader.Config{
		Identity:      identity,
		LeaseDuration: 3 * time.Second,
		RenewDeadline: 1400 * time.Millisecond,
		RetryPeriod:   300 * time.Millisecond,
	}
	h.Options.Sharding = shard.Options{Enabled: true, Slots: slots}
	return h
}

// Start builds the Manager, failing the test on error, and runs it in a
// goroutine until Stop or the end of the test.
func (h *Harness) Start() *Harness {
	h.T.Helper()
	b := h.Builder.WithOptions(h.Options)
	if h.API != nil {
		b = b.WithRESTConfig(h.API.Config())
	} else {
		b = b.WithClient(h.Client, h.Metadata)
	}
	m, err := b.Build()
	if err != nil {
		h.T.Fatalf("managertest: Build: %v", err)
	}
	h.Manager = m
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan struct{})
	go func() {
		defer close(h.done)
		h.err = m.Run(ctx)
	}()
	h.T.Cleanup(func() { _ = h.Stop() })
	return h
}

// Stop cancels Run, waits for it and returns its error. It may be called
// more than once. If Run has not returned within Timeout, Stop fails the
// test and returns an error saying so.
func (h *Harness) Stop() error {
	h.T.Helper()
	if h.cancel == nil {
		return nil
	}
	h.cancel()
	return h.Err()
}

// Done is closed when Run has returned (for example after a controller
// failed); Err is then Run's error.
func (h *Harness) Done() <-chan struct{} { return h.done }

// Err waits up to Timeout for Run to return and returns its error. If Run
// is still running then, Err fails the test and returns an error saying so.
func (h *Harness) Err() error {
	h.T.Helper()
	if h.done == nil {
		h.T.Fatalf("managertest: Err called before Start")
	}
	timer := time.NewTimer(h.timeout())
	defer timer.Stop()
	select {
	case <-h.done:
		return h.err
	case <-timer.C:
		err := fmt.Errorf(
			"managertest: Manager.Run still running %v after it was asked to stop "+
				"(or Err was called)",
			h.timeout(),
		)
		h.T.Error(err)
		return err
	}
}

// WaitFor polls until the named controller is in one of the phases, and
// returns its status.
func (h *Harness) WaitFor(name string, phases ...manager.Phase) manager.ControllerStatus {
	h.T.Helper()
	var last manager.ControllerStatus
	ok := h.poll(func() bool {
		st, found := h.Manager.Status(name)
		if !found {
			h.T.Fatalf("managertest: no controller named %q", name)
		}
		last = st
		for _, p := range phases {
			if st.Phase == p {
				return true
			}
		}
		return false
	})
	if !ok {
		h.T.Fatalf(
			"managertest: controller %q: still %q (err %v) after %v, want one of %v",
			name,
			last.Phase,
			last.Err,
			h.Timeout,
			phases,
		)
	}
	return last
}

// WaitRunning waits until every named controller runs.
func (h *Harness) WaitRunning(names ...string) {
	h.T.Helper()
	for _, n := range names {
		h.WaitFor(n, manager.PhaseRunning)
	}
}

// WaitHealthy polls path (for example "/readyz") until it answers 200.
func (h *Harness) WaitHealthy(path string) {
	h.T.Helper()
	var code int
	var body string
	if !h.poll(
		func() bool { code, body = h.Get(path + "?verbose"); return code == http.StatusOK },
	) {
		h.T.Fatalf("managertest: %s still %d after %v:\n%s", path, code, h.Timeout, body)
	}
}

// Get requests path from the Manager's handler and returns the status code
// and body.
func (h *Harness) Get(path string) (int, string) {
	rec := httptest.NewRecorder()
	h.Manager.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, strings.TrimSpace(rec.Body.String())
}

// poll calls cond every 10ms until it is true or the timeout passes.
func (h *Harness) poll(cond func() bool) bool { return pollFor(h.timeout(), cond) }

func pollFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
}

// Eventually fails t unless cond becomes true within DefaultTimeout,
// checking every 10ms; what names the awaited condition in the failure.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, what, cond)
}

func (h *Harness) timeout() time.Duration {
	if h.Timeout <= 0 {
		return DefaultTimeout
	}
	return h.Timeout
}

// copying passes on w's events with objects of their own, as a real API
// server's watchers each decode their own: the fake tracker sends the
// object it stores, which an informer's transform (informers.
// StripManagedFields) would otherwise modify under a concurrent Get.
// listOptions returns a watch action's ListOptions. The tracker given them
// delivers the objects written after the resourceVersion they name, so an
// informer's watch sees a write made between its LIST and its WATCH, as
// from an API server. (A deletion in that gap is still lost: the tracker
// keeps no history.)
func listOptions(action k8stesting.Action) metav1.ListOptions {
	if w, ok := action.(k8stesting.WatchActionImpl); ok {
		return w.ListOptions
	}
	return metav1.ListOptions{}
}

func copying(w watch.Interface) watch.Interface {
	c := &copyingWatch{in: w, out: make(chan watch.Event), stop: make(chan struct{})}
	go c.loop()
	return c
}

type copyingWatch struct {
	in   watch.Interface
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func (c *copyingWatch) ResultChan() <-chan watch.Event { return c.out }

func (c *copyingWatch) Stop() {
	c.once.Do(func() {
		close(c.stop)
		c.in.Stop()
	})
}

func (c *copyingWatch) loop() {
	defer close(c.out)
	for {
		select {
		case <-c.stop:
			return
		case e, ok := <-c.in.ResultChan():
			if !ok {
				return
			}
			if e.Object != nil {
				e.Object = e.Object.DeepCopyObject()
			}
			select {
			case c.out <- e:
			case <-c.stop:
				return
			}
		}
	}
}
