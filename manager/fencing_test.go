package manager_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/fence"
	"github.com/ctrlhost/ctrlhost/internal/fakeapi"
	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/leader"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/shard"
)

// apiFixture is a Manager built over a REST config of an in-memory API
// server (so its clients are real and fenced), with a switch that makes
// the main Lease's renewals fail, as a partition would.
type apiFixture struct {
	server  *fakeapi.Server
	partial atomic.Bool // Lease writes fail
	hooks   []fakeapi.Hook
	m       *manager.Manager
	cancel  context.CancelFunc
	done    chan error
}

func newAPIFixture(t *testing.T, opts manager.Options, ds ...descriptor.Descriptor) *apiFixture {
	t.Helper()
	f := &apiFixture{server: fakeapi.New(), done: make(chan error, 1)}
	f.server.SetHook(func(w http.ResponseWriter, r *fakeapi.Request) error {
		if r.Resource.GVR.Resource == "leases" && r.Mutating() && f.partial.Load() {
			return apierrors.NewServiceUnavailable("injected: the API server is unreachable for Lease writes")
		}
		for _, h := range f.hooks {
			if err := h(w, r); err != nil {
				return err
			}
		}
		return nil
	})
	m, err := manager.NewBuilder("fenced-manager").WithRESTConfig(fakeapi.Config(f.server, nil)).
		WithOptions(opts).WithLogger(testr.New(t)).Register(ds...).Build()
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	return f
}

func (f *apiFixture) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go func() { f.done <- f.m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-f.done:
		case <-time.After(30 * time.Second):
			t.Error("Run did not return within 30s of cancel")
		}
	})
}

func (f *apiFixture) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-f.done:
		f.done <- err
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s")
		return nil
	}
}

// A controller that ignores its context cannot write once its term's
// lease is lost: the clients a term hands out are fenced, and the write is
// refused before it leaves the process.
func TestFencedClientRefusesWritesOnceLeaseLost(t *testing.T) {
	wrote := make(chan error, 1)
	var lost atomic.Bool
	var lateWrites atomic.Int32
	d := descriptor.New("stubborn-controller", func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		cs, err := cc.ClientBuilder.Client("stubborn-controller")
		if err != nil {
			return nil, err
		}
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			<-ctx.Done()
			_, err := cs.CoreV1().ConfigMaps("default").Create(context.Background(),
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{})
			wrote <- err
			return nil
		}), nil
	})
	f := newAPIFixture(t, fastElection("only"), d)
	f.hooks = append(f.hooks, func(_ http.ResponseWriter, r *fakeapi.Request) error {
		if r.Resource.GVR.Resource == "configmaps" && lost.Load() {
			lateWrites.Add(1)
		}
		return nil
	})
	f.start(t)
	waitPhase(t, f.m, "stubborn-controller", manager.PhaseRunning)
	lost.Store(true)
	f.partial.Store(true)
	err := recv(t, "the controller's late write", wrote)
	if !errors.Is(err, fence.ErrFenced) {
		t.Errorf("write after the lease was lost: %v, want fence.ErrFenced", err)
	}
	if err := f.wait(t); !errors.Is(err, leader.ErrLeaseLost) {
		t.Errorf("Run = %v, want ErrLeaseLost", err)
	}
	if n := lateWrites.Load(); n > 0 {
		t.Errorf("the API server received %d ConfigMap writes after the lease was lost", n)
	}
}

// Defect: under --use-service-account-credentials, a fenced controller's
// first request made the host create its ServiceAccount and a token with
// an unfenced client, on a background context. Now the token is minted on
// the term's controllers' context through a client fenced by the term's
// gate: a controller told to stop (or whose lease was lost) makes no such
// write.
func TestServiceAccountTokensAreMintedWithinTheTerm(t *testing.T) {
	read := make(chan struct{})
	var lost atomic.Bool
	var lateSA, minted atomic.Int32
	d := descriptor.New("stubborn-controller", func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		cs, err := cc.ClientBuilder.Client("stubborn-controller")
		if err != nil {
			return nil, err
		}
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			<-ctx.Done()
			// Its first request: a read, which needs a token.
			_, _ = cs.CoreV1().ConfigMaps("default").Get(context.Background(), "x", metav1.GetOptions{})
			close(read)
			return nil
		}), nil
	})
	opts := fastElection("only")
	opts.UseServiceAccountCredentials = true
	f := newAPIFixture(t, opts, d)
	f.hooks = append(f.hooks, func(w http.ResponseWriter, r *fakeapi.Request) error {
		if r.Resource.GVR.Resource != "serviceaccounts" || !r.Mutating() {
			return nil
		}
		if lost.Load() {
			lateSA.Add(1)
		}
		if r.Subresource == "token" {
			minted.Add(1)
			return answerToken(w)
		}
		return nil
	})
	f.start(t)
	waitPhase(t, f.m, "stubborn-controller", manager.PhaseRunning)
	lost.Store(true)
	f.partial.Store(true)
	recv(t, "the controller's late read", read)
	if err := f.wait(t); !errors.Is(err, leader.ErrLeaseLost) {
		t.Errorf("Run = %v, want ErrLeaseLost", err)
	}
	if n := lateSA.Load(); n > 0 {
		t.Errorf("%d ServiceAccount or token writes reached the API server after the lease was lost", n)
	}
	if n := minted.Load(); n > 0 {
		t.Errorf("%d tokens minted for a controller whose term had ended", n)
	}
}

// Defect: events were written through the Manager's own unfenced client
// from a queue that outlived Run. Now a controller's events go through its
// own client, and Run returns only once the event writes it started have
// returned: none is still in flight at the API server afterwards.
func TestRunWaitsForEventWrites(t *testing.T) {
	arrived := make(chan struct{}, 1)
	var mu sync.Mutex
	var inFlight bool
	var agent string
	d := descriptor.New("eventful-controller", func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			cc.EventRecorder.Event(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "default", UID: "u"}},
				corev1.EventTypeNormal, "Noted", "an event")
			<-ctx.Done()
			return nil
		}), nil
	})
	f := newAPIFixture(t, fastElection("only"), d)
	f.hooks = append(f.hooks, func(_ http.ResponseWriter, r *fakeapi.Request) error {
		if r.Resource.GVR.Resource != "events" {
			return nil
		}
		mu.Lock()
		inFlight, agent = true, r.UserAgent
		mu.Unlock()
		arrived <- struct{}{}
		<-r.Context.Done() // the API server never answers; only the client can end it
		mu.Lock()
		inFlight = false
		mu.Unlock()
		return r.Context.Err()
	})
	f.start(t)
	recv(t, "the event write", arrived)
	f.cancel()
	if err := f.wait(t); err != nil {
		t.Errorf("Run = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if inFlight {
		t.Error("an event write of the Manager was still in flight after Run returned")
	}
	if want := "fenced-manager/eventful-controller"; agent != want {
		t.Errorf("event written with user agent %q, want the controller's own client (%q)", agent, want)
	}
}

// Defect (found by the simulation, seed 7574): under
// --use-service-account-credentials, an event write that needs its
// controller's token held the event flush, and so the stop, until the
// token was minted or the mint gave up (30s): the mint ran on the event
// clients' context, which ended only after the flush. Now that context
// ends with the flush's deadline.
func TestEventFlushGivesUpAMintThatHangs(t *testing.T) {
	minting := make(chan struct{}, 1)
	d := descriptor.New("eventful-controller", func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			cc.EventRecorder.Event(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c",
				Namespace: "default", UID: "u"}}, corev1.EventTypeNormal, "Noted", "an event")
			<-ctx.Done()
			return nil
		}), nil
	})
	opts := fastElection("only")
	opts.UseServiceAccountCredentials = true
	f := newAPIFixture(t, opts, d)
	f.hooks = append(f.hooks, hangTokenRequests(minting))
	f.start(t)
	recv(t, "the event client's token request", minting)
	stopped := time.Now()
	f.cancel()
	if err := f.wait(t); err != nil {
		t.Errorf("Run = %v", err)
	}
	// The flush gives up after eventFlushTimeout (1s); the mint would
	// have held it 30s.
	if took := time.Since(stopped); took > 10*time.Second {
		t.Errorf("Run returned %v after it was told to stop, held by a token mint", took)
	}
}

// A controller the term built, stopped alone by SetControllers while a
// request of its Run waits for its ServiceAccount token (the API server
// never answers the TokenRequest), stops within its bound. The mint ran on
// the term's context: it held the request, and so the controller's Run,
// until the term ended; the stop overran its bound and the term failed,
// naming a controller that had returned as soon as it could (simulation
// seed 832). Now stopping a controller alone ends its clients' mint.
func TestAControllerStoppedAloneIsNotHeldByItsTokenMint(t *testing.T) {
	const name = "lazy-controller"
	minting := make(chan struct{}, 1)
	d := descriptor.New(name, func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			for ctx.Err() == nil {
				cs, err := cc.ClientBuilder.Client(name) // built anew each time
				if err != nil {
					return err
				}
				_, _ = cs.CoreV1().ConfigMaps("default").Get(ctx, "x", metav1.GetOptions{})
			}
			return nil
		}), nil
	})
	opts := fastElection("only")
	opts.UseServiceAccountCredentials = true
	opts.ControllerShutdownTimeout = 2 * time.Second
	f := newAPIFixture(t, opts, d)
	f.hooks = append(f.hooks, hangTokenRequests(minting))
	f.start(t)
	recv(t, "the controller's token request", minting)
	if err := f.m.SetControllers([]string{"*", "-" + name}); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, f.m, name, manager.PhaseDisabled)
	select {
	case err := <-f.done:
		t.Fatalf("Run returned while the controller was stopped alone: %v", err)
	default:
	}
	f.cancel()
	if err := f.wait(t); err != nil {
		t.Errorf("Run = %v", err)
	}
}

// hangTokenRequests is a hook under which the API server never answers a
// TokenRequest (only the client can end it), and which tells minting, if it
// can without waiting, that one arrived.
func hangTokenRequests(minting chan<- struct{}) fakeapi.Hook {
	return func(_ http.ResponseWriter, r *fakeapi.Request) error {
		if r.Resource.GVR.Resource != "serviceaccounts" || r.Subresource != "token" {
			return nil
		}
		select {
		case minting <- struct{}{}:
		default:
		}
		<-r.Context.Done()
		return r.Context.Err()
	}
}

// waitPhase waits until the named controller reaches phase.
func waitPhase(t *testing.T, m *manager.Manager, name string, phase manager.Phase) {
	t.Helper()
	if !poll.For(30*time.Second, func() bool {
		st, _ := m.Status(name)
		return st.Phase == phase
	}) {
		st, _ := m.Status(name)
		t.Fatalf("%s: phase %s after 30s, want %s", name, st.Phase, phase)
	}
}

// A sharded controller's clients are fenced by its slot's Lease: once that
// Lease is lost, a write of the slot's instance is refused, while the
// main lock's controllers, whose Lease is fine, go on writing (even while
// their term stops). It also found that a negative QPS, client-go's "no
// rate limit", made the slot terms' shared rate limiter refuse every
// request.
func TestSlotTermWritesAreFencedBySlotLease(t *testing.T) {
	type attempt struct {
		ctrl string
		err  error
	}
	wrote := make(chan attempt, 4)
	writer := func(name string) descriptor.Descriptor {
		return descriptor.New(name, func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
			cs, err := cc.ClientBuilder.Client(name)
			if err != nil {
				return nil, err
			}
			return descriptor.ControllerFunc(func(ctx context.Context) error {
				<-ctx.Done() // ignores it: it writes anyway, once
				_, err := cs.CoreV1().ConfigMaps("default").Create(context.Background(),
					&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-"}}, metav1.CreateOptions{})
				wrote <- attempt{name, err}
				return nil
			}), nil
		})
	}
	opts := fastElection("only")
	opts.Sharding = shard.Options{Enabled: true, Slots: 1}
	var slotLost atomic.Bool
	f := newAPIFixture(t, opts, writer("sharded-controller").Sharded(shard.ByNamespace), writer("main-controller"))
	f.hooks = append(f.hooks, func(_ http.ResponseWriter, r *fakeapi.Request) error {
		if r.Resource.GVR.Resource == "leases" && r.Mutating() && r.Name == "fenced-manager-shard-slot-0" && slotLost.Load() {
			return apierrors.NewServiceUnavailable("injected: the slot Lease cannot be renewed")
		}
		return nil
	})
	f.start(t)
	waitPhase(t, f.m, "sharded-controller", manager.PhaseRunning)
	waitPhase(t, f.m, "main-controller", manager.PhaseRunning)
	slotLost.Store(true)
	got := recv(t, "the slot instance's write", wrote)
	if got.ctrl != "sharded-controller" || !errors.Is(got.err, fence.ErrFenced) {
		t.Errorf("%s's write after its slot Lease was lost: %v, want fence.ErrFenced", got.ctrl, got.err)
	}
	f.cancel()
	got = recv(t, "the main controller's write", wrote)
	if got.ctrl != "main-controller" {
		t.Fatalf("second write by %s", got.ctrl)
	}
	// Its term is stopping, its lease still valid: the write goes out.
	if got.err != nil {
		t.Errorf("main controller's write while its term stops with a valid lease: %v", got.err)
	}
	if err := f.wait(t); !errors.Is(err, leader.ErrLeaseLost) && err != nil {
		t.Logf("Run = %v", err)
	}
}

// A controller's ServiceAccount token is minted through a client fenced by
// its term's gate, not only on the term's context: while the gate is shut
// on its deadline (renewals late: a paused process resuming, before
// client-go noticed), a first request of a new client, even a read, makes
// no ServiceAccount or TokenRequest write. The leader election clock is a
// fake one here, stepped past the gate's deadline; client-go's renewals,
// on real timers, open the gate again at their next success.
func TestServiceAccountTokensAreFencedByTheGate(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	try, tried := make(chan struct{}), make(chan bool)
	// shutOnDeadline reports whether the gate is shut because its deadline
	// passed (not because the term ended).
	shutOnDeadline := func(gate *fence.Gate) bool {
		var fe *fence.Error
		return errors.As(gate.Check("lazy-controller"), &fe) &&
			fe.Reason != "" && !strings.Contains(fe.Reason, "ended")
	}
	var termGate atomic.Pointer[fence.Gate]
	d := descriptor.New("lazy-controller", func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			gate := leader.TermFrom(ctx).Gate()
			termGate.Store(gate)
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-try:
				}
				shut := shutOnDeadline(gate)
				if shut {
					// A client built now: its first request mints a token.
					cs, err := cc.ClientBuilder.Client("lazy-controller")
					if err != nil {
						return err
					}
					_, _ = cs.CoreV1().ConfigMaps("default").Get(ctx, "x", metav1.GetOptions{})
				}
				tried <- shut
			}
		}), nil
	})
	opts := fastElection("only")
	opts.UseServiceAccountCredentials = true
	opts.LeaderElection.Clock = clk
	f := newAPIFixture(t, opts, d)
	var shutWrites atomic.Int32
	var window atomic.Bool
	f.hooks = append(f.hooks, func(w http.ResponseWriter, r *fakeapi.Request) error {
		if r.Resource.GVR.Resource != "serviceaccounts" || !r.Mutating() {
			return nil
		}
		// Counted only while the gate is still shut: a renewal (on real
		// timers) may open it between the controller's look and its read,
		// and the mint is then allowed.
		if g := termGate.Load(); window.Load() && g != nil && shutOnDeadline(g) {
			shutWrites.Add(1)
		}
		if r.Subresource == "token" {
			return answerToken(w)
		}
		return nil
	})
	f.start(t)
	waitPhase(t, f.m, "lazy-controller", manager.PhaseRunning)
	// A renewal may open the gate again between the step and the read:
	// then the step is made again.
	for attempt := 0; ; attempt++ {
		if attempt == 20 {
			t.Fatal("the gate never stayed shut long enough for the controller's read")
		}
		window.Store(true)
		clk.Step(opts.LeaderElection.LeaseDuration)
		try <- struct{}{}
		shut := <-tried
		window.Store(false)
		if shut {
			break
		}
	}
	if n := shutWrites.Load(); n > 0 {
		t.Errorf("%d ServiceAccount or token writes left while the term's gate was shut", n)
	}
}

// answerToken answers a TokenRequest with a token valid for an hour.
func answerToken(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	return errors.Join(fakeapi.ErrAnswered, json.NewEncoder(w).Encode(&authenticationv1.TokenRequest{
		TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenRequest"},
		Status: authenticationv1.TokenRequestStatus{Token: "t",
			ExpirationTimestamp: metav1.NewTime(time.Now().Add(time.Hour))}}))
}

// Under --use-service-account-credentials a controller's events are
// written with its own client (Descriptor.ClientName), whose ServiceAccount
// KCM's RBAC rules let write events: the node lifecycle controller acts as
// "node-controller", and so must its events (a kwok cluster's conformance
// smoke saw them forbidden to "node-lifecycle-controller").
func TestEventsAreWrittenWithTheControllersClient(t *testing.T) {
	d := descriptor.New("eventful-controller", func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			cc.EventRecorder.Event(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c",
				Namespace: "default", UID: "u"}}, corev1.EventTypeNormal, "Noted", "an event")
			<-ctx.Done()
			return nil
		}), nil
	}).WithClientName("eventful-client")
	opts := fastElection("only")
	opts.UseServiceAccountCredentials = true
	f := newAPIFixture(t, opts, d)
	var mu sync.Mutex
	var minted []string
	wrote := make(chan struct{}, 1)
	f.hooks = append(f.hooks, func(w http.ResponseWriter, r *fakeapi.Request) error {
		switch {
		case r.Resource.GVR.Resource == "serviceaccounts" && r.Subresource == "token":
			mu.Lock()
			minted = append(minted, r.Name)
			mu.Unlock()
			return answerToken(w)
		case r.Resource.GVR.Resource == "events" && r.Mutating():
			select {
			case wrote <- struct{}{}:
			default:
			}
		}
		return nil
	})
	f.start(t)
	recv(t, "the event's write", wrote)
	f.cancel()
	if err := f.wait(t); err != nil {
		t.Errorf("Run = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(minted) == 0 || slices.ContainsFunc(minted, func(sa string) bool { return sa != "eventful-client" }) {
		t.Errorf("tokens were minted for ServiceAccounts %q; want only the controller's client, eventful-client",
			minted)
	}
}
