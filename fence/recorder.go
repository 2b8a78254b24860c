package fence

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// Recorder wraps rec so that events are dropped while g refuses controller's
// writes: an event is a write too. A nil Gate returns rec unchanged. onDrop,
// if not nil, is called with the refusal for each dropped event.
func Recorder(g *Gate, controller string, rec record.EventRecorder, onDrop func(error)) record.EventRecorder {
	if g == nil {
		return rec
	}
	return &recorder{gate: g, controller: controller, rec: rec, onDrop: onDrop}
}

type recorder struct {
	gate       *Gate
	controller string
	rec        record.EventRecorder
	onDrop     func(error)
}

func (r *recorder) allowed() bool {
	err := r.gate.Check(r.controller)
	if err != nil && r.onDrop != nil {
		r.onDrop(err)
	}
	return err == nil
}

func (r *recorder) Event(obj runtime.Object, eventtype, reason, message string) {
	if r.allowed() {
		r.rec.Event(obj, eventtype, reason, message)
	}
}

func (r *recorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if r.allowed() {
		r.rec.Eventf(obj, eventtype, reason, messageFmt, args...)
	}
}

func (r *recorder) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	if r.allowed() {
		r.rec.AnnotatedEventf(obj, annotations, eventtype, reason, messageFmt, args...)
	}
}
