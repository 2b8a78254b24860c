// Package events records one controller's events for one term: a client-go
// event broadcaster whose sink writes with the controller's own client (its
// user agent, its ServiceAccount under --use-service-account-credentials,
// its fenced transport), checks the term's write gate when the write leaves
// the process, and ends with the term.
//
// Guarantees:
//   - No event is written once the gate refuses the controller's writes: the
//     sink checks the gate before each write, and the client's fenced
//     transport checks it again as the request leaves.
//   - Once Stop returned, nothing this Recorder started writes: later events
//     are dropped, and the writes in flight have returned (Stop waits for
//     them within its context, then cancels them).
//   - A dropped event (fenced, or recorded after Stop) is logged at V(2)
//     and never as an error, so a clean stop logs none.
//
// Non-guarantees: events still queued in the broadcaster when Stop is
// called may be dropped (as kube-controller-manager's are when it exits);
// aggregation and spam filtering are client-go's, per Recorder, so they
// start afresh each term.
package events

import (
	"context"
	"errors"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/ctrlhost/ctrlhost/fence"
)

// Recorder is one controller's event recording in one term. Create it with
// New; Stop it when the term's controllers have returned.
type Recorder struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	sink        *sink
}

// New starts recording for controller: events name source as their
// component and are written through client, whose writes gate fences (nil:
// not fenced). scheme resolves the objects events are about.
func New(client typedcorev1.EventsGetter, gate *fence.Gate, controller, source string, scheme *runtime.Scheme,
	log logr.Logger) *Recorder {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sink{
		events: client.Events(""), gate: gate, controller: controller, log: log,
		ctx: ctx, cancel: cancel,
	}
	b := record.NewBroadcaster(record.WithContext(logr.NewContext(context.Background(), log)))
	b.StartRecordingToSink(s)
	return &Recorder{
		broadcaster: b,
		sink:        s,
		recorder:    b.NewRecorder(scheme, corev1.EventSource{Component: source}),
	}
}

// EventRecorder is what the controller records with. Events recorded after
// Stop are dropped quietly.
func (r *Recorder) EventRecorder() record.EventRecorder { return stoppable{r} }

// Stop drops later events, shuts the broadcaster down, and waits for the
// writes in flight until ctx is done, then cancels them and waits for them
// to return.
func (r *Recorder) Stop(ctx context.Context) {
	r.sink.close()
	r.broadcaster.Shutdown()
	r.sink.wait(ctx)
}

// stoppable drops events once the Recorder stopped, instead of handing
// them to a shut broadcaster (which logs an error for each).
type stoppable struct{ r *Recorder }

func (s stoppable) Event(obj runtime.Object, eventtype, reason, message string) {
	if s.r.sink.open() {
		s.r.recorder.Event(obj, eventtype, reason, message)
	}
}

func (s stoppable) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if s.r.sink.open() {
		s.r.recorder.Eventf(obj, eventtype, reason, messageFmt, args...)
	}
}

func (s stoppable) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason,
	messageFmt string, args ...any) {
	if s.r.sink.open() {
		s.r.recorder.AnnotatedEventf(obj, annotations, eventtype, reason, messageFmt, args...)
	}
}

// sink is the broadcaster's record.EventSink.
type sink struct {
	events     typedcorev1.EventInterface
	gate       *fence.Gate
	controller string
	log        logr.Logger
	ctx        context.Context // cancelled when Stop gives up waiting
	cancel     context.CancelFunc

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup
}

func (s *sink) open() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.closed
}

func (s *sink) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
}

// wait waits for the writes in flight, cancelling them once ctx is done.
func (s *sink) wait(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.inflight.Wait()
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.cancel()
		<-done
	}
	s.cancel()
}

// dropped is what the sink answers for an event it does not write:
// client-go's recorder gives up on an AlreadyExists without retrying and
// logs it at V(5) only.
func dropped(ev *corev1.Event) error {
	return apierrors.NewAlreadyExists(schema.GroupResource{Resource: "events"}, ev.Name)
}

// begin admits one write: false when the sink is closed or the gate
// refuses it.
func (s *sink) begin(ev *corev1.Event) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.log.V(2).Info("Dropped an event recorded while the term stopped",
			"controller", s.controller, "reason", ev.Reason)
		return false
	}
	if err := s.gate.Check(s.controller); err != nil {
		s.log.V(2).Info("Dropped an event", "controller", s.controller, "reason", ev.Reason, "err", err.Error())
		return false
	}
	s.inflight.Add(1)
	return true
}

func (s *sink) write(ev *corev1.Event, f func(ctx context.Context) (*corev1.Event, error)) (*corev1.Event, error) {
	if !s.begin(ev) {
		return nil, dropped(ev)
	}
	defer s.inflight.Done()
	out, err := f(s.ctx)
	if errors.Is(err, fence.ErrFenced) || (err != nil && s.ctx.Err() != nil) {
		// The gate shut while the event was on its way out, or the
		// term's stop gave up on it.
		s.log.V(2).Info("Dropped an event", "controller", s.controller, "reason", ev.Reason, "err", err.Error())
		return nil, dropped(ev)
	}
	return out, err
}

func (s *sink) Create(ev *corev1.Event) (*corev1.Event, error) {
	return s.write(ev, func(ctx context.Context) (*corev1.Event, error) {
		return s.events.CreateWithEventNamespaceWithContext(ctx, ev)
	})
}

func (s *sink) Update(ev *corev1.Event) (*corev1.Event, error) {
	return s.write(ev, func(ctx context.Context) (*corev1.Event, error) {
		return s.events.UpdateWithEventNamespaceWithContext(ctx, ev)
	})
}

func (s *sink) Patch(ev *corev1.Event, data []byte) (*corev1.Event, error) {
	return s.write(ev, func(ctx context.Context) (*corev1.Event, error) {
		return s.events.PatchWithEventNamespaceWithContext(ctx, ev, data)
	})
}
