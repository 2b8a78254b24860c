package events_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"

	"github.com/ctrlhost/ctrlhost/fence"
	"github.com/ctrlhost/ctrlhost/internal/events"
	"github.com/ctrlhost/ctrlhost/internal/fakeapi"
	"github.com/ctrlhost/ctrlhost/internal/poll"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// errorLog is a logger that collects error lines.
type errorLog struct {
	mu   sync.Mutex
	errs []string
}

func (l *errorLog) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		if strings.Contains(args, `"error"`) || strings.Contains(args, "Unable") {
			l.mu.Lock()
			l.errs = append(l.errs, prefix+" "+args)
			l.mu.Unlock()
		}
	}, funcr.Options{Verbosity: 0})
}

func (l *errorLog) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.errs...)
}

// fixture is a server whose event creates can be held, a gate, and a
// fenced client, as the host hands a controller.
type fixture struct {
	server  *fakeapi.Server
	gate    *fence.Gate
	client  kubernetes.Interface
	hold    chan struct{} // an event create waits for it while non-nil
	arrived chan string   // reasons of event creates, as they arrive
	mu      sync.Mutex
	written []string // reasons the server accepted
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{
		server:  fakeapi.New(),
		gate:    fence.NewGate("test term", nil),
		arrived: make(chan string, 10),
	}
	f.gate.Extend(time.Now().Add(time.Hour))
	f.server.SetHook(func(_ http.ResponseWriter, r *fakeapi.Request) error {
		if r.Resource.GVR.Resource != "events" || r.Verb != "create" {
			return nil
		}
		reason := reasonOf(r.Body)
		f.arrived <- reason
		f.mu.Lock()
		hold := f.hold
		f.mu.Unlock()
		if hold != nil {
			<-hold
		}
		f.mu.Lock()
		f.written = append(f.written, reason)
		f.mu.Unlock()
		return nil
	})
	cfg := fakeapi.Config(f.server, func(rt http.RoundTripper) http.RoundTripper {
		return fence.RoundTripper(f.gate, "widget-controller", rt)
	})
	cfg.UserAgent = "host/widget-controller"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.client = cs
	return f
}

func reasonOf(body []byte) string {
	s := string(body)
	i := strings.Index(s, `"reason":"`)
	if i < 0 {
		return ""
	}
	s = s[i+len(`"reason":"`):]
	return s[:strings.IndexByte(s, '"')]
}

func (f *fixture) accepted() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.written...)
}

var pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}}

// An event recorded while the gate was open is not written once the gate
// shut: the sink checks the gate when the write leaves the process, not
// when the event was recorded. And Stop returns only once the write in
// flight returned, so nothing is written after it.
func TestEventsObeyTheGateWhenWritten(t *testing.T) {
	f := newFixture(t)
	var log errorLog
	r := events.New(
		f.client.CoreV1(),
		f.gate,
		"widget-controller",
		"widget-controller",
		scheme.Scheme,
		log.logger(),
	)
	rec := r.EventRecorder()

	hold := make(chan struct{})
	f.mu.Lock()
	f.hold = hold
	f.mu.Unlock()
	rec.Event(pod, corev1.EventTypeNormal, "First", "in flight when the gate shuts")
	select {
	case <-f.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the first event never reached the server")
	}
	// Queued behind the first while the gate is open.
	rec.Event(pod, corev1.EventTypeNormal, "Second", "recorded while the gate was open")
	f.gate.Close("the lease was lost")

	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.Stop(ctx)
	}()
	select {
	case <-stopped:
		t.Fatal("Stop returned while a write was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(hold)
	<-stopped
	rec.Event(pod, corev1.EventTypeNormal, "Third", "recorded after Stop")

	if got := f.accepted(); len(got) != 1 || got[0] != "First" {
		t.Errorf("the server accepted %q, want only the event in flight when the gate shut", got)
	}
	if errs := log.lines(); len(errs) > 0 {
		t.Errorf("dropping events logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// Events are written while the gate is open, with the client given (the
// controller's own credentials and user agent).
func TestEventsAreWrittenWithTheControllersClient(t *testing.T) {
	f := newFixture(t)
	var agents []string
	var mu sync.Mutex
	f.server.SetHook(func(_ http.ResponseWriter, r *fakeapi.Request) error {
		if r.Resource.GVR.Resource == "events" {
			mu.Lock()
			agents = append(agents, r.UserAgent)
			mu.Unlock()
		}
		return nil
	})
	var log errorLog
	r := events.New(
		f.client.CoreV1(),
		f.gate,
		"widget-controller",
		"widget-source",
		scheme.Scheme,
		log.logger(),
	)
	r.EventRecorder().Eventf(pod, corev1.EventTypeWarning, "Broken", "widget %d", 7)
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "events"}
	poll.Until(t, "the event to be written",
		func() bool { return len(f.server.List(gvr, "ns")) != 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.Stop(ctx)
	ev := f.server.List(schema.GroupVersionResource{Version: "v1", Resource: "events"}, "ns")[0]
	if src, _ := ev["source"].(map[string]any); src["component"] != "widget-source" {
		t.Errorf("event source %v, want widget-source", ev["source"])
	}
	mu.Lock()
	defer mu.Unlock()
	if len(agents) == 0 || agents[0] != "host/widget-controller" {
		t.Errorf("events written with user agents %q, want the controller's client's", agents)
	}
}

// Stop returns only once the Recorder's code is done with every event it
// took: here the log line of a failed write is held, and Stop waits for it.
// Before, client-go's sink loop logged (through klog's globals) after the
// sink's write had returned, so Stop returned first, and a program undoing
// its klog routing after the manager stopped raced with that line.
func TestNothingTheRecorderStartedRunsAfterStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := fake.NewClientset()
		failCreates(cs, func(int) error { return errors.New("connection refused") })
		logging, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		log := funcr.New(func(_, args string) {
			if strings.Contains(args, "connection refused") {
				once.Do(func() {
					close(logging)
					<-release
				})
			}
		}, funcr.Options{Verbosity: 10})
		r := newRecorder(cs, log)
		r.EventRecorder().Event(pod, corev1.EventTypeNormal, "Started", "the write fails")
		<-logging

		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			r.Stop(context.Background())
		}()
		synctest.Wait()
		select {
		case <-stopped:
			t.Error("Stop returned while the recorder was still logging a failed write")
		default:
		}
		close(release)
		<-stopped
	})
}

// A transport error is retried, as client-go's recorder does, and a server
// refusal is not; the retries wait on the clock (fake here).
func TestATransportErrorIsRetriedAndARefusalIsNot(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		creates int
	}{
		{"transport error", errors.New("connection refused"), 2},
		{"refusal", apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "e",
			errors.New("no")), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cs := fake.NewClientset()
				var creates int
				failCreates(cs, func(n int) error {
					creates = n
					if n == 1 {
						return tc.err
					}
					return nil
				})
				r := newRecorder(cs, logr.Discard())
				r.EventRecorder().Event(pod, corev1.EventTypeNormal, "Started", "first write fails")
				<-time.After(time.Minute) // the bubble's fake clock: past the longest first wait
				synctest.Wait()
				r.Stop(context.Background())
				if creates != tc.creates {
					t.Errorf("%d creates, want %d", creates, tc.creates)
				}
			})
		})
	}
}

// A write waiting to be retried is given up when the Recorder stops, so a
// stop does not wait out the retry delay (10 s) nor write after it.
func TestStopGivesUpAWriteWaitingToBeRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := fake.NewClientset()
		var creates int
		failCreates(cs, func(n int) error {
			creates = n
			return errors.New("connection refused")
		})
		r := newRecorder(cs, logr.Discard())
		r.EventRecorder().Event(pod, corev1.EventTypeNormal, "Started", "every write fails")
		synctest.Wait() // the first write failed; the retry waits on the clock
		start := time.Now()
		r.Stop(context.Background())
		if waited := time.Since(start); waited != 0 {
			t.Errorf("Stop waited %v of the bubble's clock for the retry", waited)
		}
		<-time.After(time.Minute) // the bubble's fake clock: past every retry delay
		if creates != 1 {
			t.Errorf("%d creates, want the one before Stop", creates)
		}
	})
}

// failCreates makes cs answer its n-th event create (from 1) with
// answer(n), and lets it through when that is nil.
func failCreates(cs *fake.Clientset, answer func(n int) error) {
	n := 0
	cs.PrependReactor("create", "events", func(clienttesting.Action) (bool, runtime.Object, error) {
		n++
		if err := answer(n); err != nil {
			return true, nil, err
		}
		return false, nil, nil
	})
}

// newRecorder records for widget-controller through cs, unfenced.
func newRecorder(cs *fake.Clientset, log logr.Logger) *events.Recorder {
	const name = "widget-controller"
	return events.New(cs.CoreV1(), nil, name, name, scheme.Scheme, log)
}
