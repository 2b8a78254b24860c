// Package events records one controller's events for one term: a client-go
// event broadcaster and correlator (aggregation, spam filtering), whose
// events this package writes itself, with the controller's own client (its
// user agent, its ServiceAccount under --use-service-account-credentials,
// its fenced transport), checking the term's write gate when the write
// leaves the process; it ends with the term.
//
// Guarantees:
//   - No event is written once the gate refuses the controller's writes: the
//     writer checks the gate before each write, and the client's fenced
//     transport checks it again as the request leaves.
//   - Once Stop returned, no code of this Recorder runs: later events are
//     dropped, a write waiting to be retried is given up, and the writes in
//     flight have returned and been logged (Stop waits for them within its
//     context, then cancels them). Nothing it started logs after Stop, so a
//     program may undo its logging setup (logging.ForProgram's done) then.
//   - A dropped event (fenced, or recorded after Stop) is logged at V(2)
//     and never as an error, so a clean stop logs none.
//   - Writes follow client-go's recorder: an aggregated event (count > 1)
//     is patched, and created when gone; a request that cannot be built or
//     that the server refused is not retried; a transport error is retried
//     up to 12 times, 10 s apart (the first wait randomised).
//
// Non-guarantees: events still queued in the broadcaster when Stop is
// called may be dropped (as kube-controller-manager's are when it exits);
// aggregation and spam filtering are client-go's, per Recorder, so they
// start afresh each term.
package events

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/ctrlhost/ctrlhost/fence"
)

// Write retries, as client-go's recorder: a transport error is retried up
// to maxTries times, retryDelay apart, the first wait randomised so that
// clients do not retry in step after an API server outage.
const (
	maxTries   = 12
	retryDelay = 10 * time.Second
)

// Recorder is one controller's event recording in one term. Create it with
// New; Stop it when the term's controllers have returned.
type Recorder struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	writer      *writer
}

// New starts recording for controller: events name source as their
// component and are written through client, whose writes gate fences (nil:
// not fenced). scheme resolves the objects events are about.
func New(
	client typedcorev1.EventsGetter,
	gate *fence.Gate,
	controller, source string,
	scheme *runtime.Scheme,
	log logr.Logger,
) *Recorder {
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{
		events: client.Events(""), gate: gate, controller: controller, log: log,
		correlator: record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{}),
		ctx:        ctx, cancel: cancel, stopping: make(chan struct{}),
	}
	// The broadcaster's own goroutine hands each event to w.handle, and
	// logs nothing of its own once running; its context carries log for
	// the one line it may write while starting.
	b := record.NewBroadcaster(record.WithContext(logr.NewContext(context.Background(), log)))
	b.StartEventWatcher(w.handle)
	return &Recorder{
		broadcaster: b,
		writer:      w,
		recorder:    b.NewRecorder(scheme, corev1.EventSource{Component: source}),
	}
}

// EventRecorder is what the controller records with. Events recorded after
// Stop are dropped quietly.
func (r *Recorder) EventRecorder() record.EventRecorder { return stoppable{r} }

// Stop drops later events, gives up the writes waiting to be retried,
// shuts the broadcaster down, and waits for the writes in flight until ctx
// is done, then cancels them and waits for them to return.
func (r *Recorder) Stop(ctx context.Context) {
	r.writer.close()
	r.broadcaster.Shutdown()
	r.writer.wait(ctx)
}

// stoppable drops events once the Recorder stopped, instead of handing
// them to a shut broadcaster (which logs an error for each).
type stoppable struct{ r *Recorder }

func (s stoppable) Event(obj runtime.Object, eventtype, reason, message string) {
	if s.r.writer.open() {
		s.r.recorder.Event(obj, eventtype, reason, message)
	}
}

func (s stoppable) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if s.r.writer.open() {
		s.r.recorder.Eventf(obj, eventtype, reason, messageFmt, args...)
	}
}

func (s stoppable) AnnotatedEventf(
	obj runtime.Object,
	annotations map[string]string,
	eventtype, reason,
	messageFmt string,
	args ...any,
) {
	if s.r.writer.open() {
		s.r.recorder.AnnotatedEventf(obj, annotations, eventtype, reason, messageFmt, args...)
	}
}

// writer writes the events the broadcaster hands it. client-go's own
// sink loop (StartRecordingToSink) is not used: its goroutine goes on
// logging through klog's globals after the sink returned, so a Stop could
// not wait for it.
type writer struct {
	events     typedcorev1.EventInterface
	gate       *fence.Gate
	controller string
	log        logr.Logger
	correlator *record.EventCorrelator // used by the broadcaster's one goroutine only
	ctx        context.Context         // cancelled when Stop gives up waiting
	cancel     context.CancelFunc
	stopping   chan struct{} // closed by close: retries are given up

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup
}

func (w *writer) open() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.closed
}

func (w *writer) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		close(w.stopping)
	}
}

// enter admits the handling of one event: false once closed.
func (w *writer) enter() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	w.inflight.Add(1)
	return true
}

// wait waits for the events being handled, cancelling their writes once
// ctx is done.
func (w *writer) wait(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.inflight.Wait()
	}()
	select {
	case <-done:
	case <-ctx.Done():
		w.cancel()
		<-done
	}
	w.cancel()
}

// handle correlates ev with the events before it and writes the result,
// retrying transport errors.
func (w *writer) handle(ev *corev1.Event) {
	if !w.enter() {
		return // queued when Stop came; dropped, as documented
	}
	defer w.inflight.Done()
	ev = ev.DeepCopy() // the broadcaster's other watchers share it
	res, err := w.correlator.EventCorrelate(ev)
	if err != nil {
		w.log.Error(err, "Event correlation failed", "controller", w.controller,
			"reason", ev.Reason)
	}
	if res.Skip {
		return
	}
	for try := 1; ; try++ {
		if w.write(res.Event, res.Patch) {
			return
		}
		if try >= maxTries {
			w.log.Error(nil, "Gave up writing an event after retries", "controller", w.controller,
				"reason", ev.Reason, "tries", try)
			return
		}
		delay := retryDelay
		if try == 1 {
			delay = time.Duration(rand.Float64() * float64(delay))
		}
		t := time.NewTimer(delay)
		select {
		case <-w.stopping:
			t.Stop()
			w.log.V(2).Info("Dropped an event waiting to be retried when the term stopped",
				"controller", w.controller, "reason", ev.Reason)
			return
		case <-t.C:
		}
	}
}

// write makes one attempt to write ev (a patch of an existing event when
// aggregated, else a create) and tells whether it is done with ev: written,
// dropped, or refused for good. false asks for a retry.
func (w *writer) write(ev *corev1.Event, patch []byte) bool {
	if err := w.gate.Check(w.controller); err != nil {
		w.log.V(2).Info("Dropped an event", "controller", w.controller, "reason", ev.Reason,
			"err", err.Error())
		return true
	}
	var out *corev1.Event
	var err error
	aggregated := ev.Count > 1
	if aggregated {
		out, err = w.events.PatchWithEventNamespaceWithContext(w.ctx, ev, patch)
	}
	if !aggregated || apierrors.IsNotFound(err) {
		ev.ResourceVersion = ""
		out, err = w.events.CreateWithEventNamespaceWithContext(w.ctx, ev)
	}
	var construction *rest.RequestConstructionError
	var status *apierrors.StatusError
	switch {
	case err == nil:
		w.correlator.UpdateState(out)
		return true
	case errors.Is(err, fence.ErrFenced) || w.ctx.Err() != nil:
		// The gate shut while the event was on its way out, or the
		// term's stop gave up on it.
		w.log.V(2).Info("Dropped an event", "controller", w.controller, "reason", ev.Reason,
			"err", err.Error())
		return true
	case errors.As(err, &construction):
		w.log.Error(err, "Cannot build an event's request; not retried", "controller", w.controller,
			"reason", ev.Reason)
		return true
	case errors.As(err, &status):
		terminating := apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
		if apierrors.IsAlreadyExists(err) || terminating {
			w.log.V(5).Info("The server refused an event; not retried", "controller", w.controller,
				"reason", ev.Reason, "err", err.Error())
		} else {
			w.log.Error(err, "The server refused an event; not retried", "controller", w.controller,
				"reason", ev.Reason)
		}
		return true
	default:
		w.log.Error(err, "Cannot write an event; retrying", "controller", w.controller,
			"reason", ev.Reason)
		return false
	}
}
