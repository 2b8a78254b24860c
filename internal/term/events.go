package term

import (
	"context"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"

	"github.com/ctrlhost/ctrlhost/fence"
	"github.com/ctrlhost/ctrlhost/internal/events"
)

// termEvents makes the event recorders of one term's controllers and stops
// them with the term: each controller's events are written with its own
// client (its credentials, its fenced transport), the gate is checked as
// each write leaves, and the term waits for the writes in flight.
type termEvents struct {
	host kubernetes.Interface // writes the events of a controller whose client cannot be built
	log  logr.Logger
	gate *fence.Gate

	once   sync.Once
	ctx    context.Context // the recorders' clients' context (token minting)
	cancel context.CancelFunc

	mu   sync.Mutex
	recs []*events.Recorder
}

// recorder returns the event recorder of the controller name, whose
// ClientBuilder is cb: it writes with the controller's client (clientName,
// Descriptor.ClientName), whose ServiceAccount's RBAC rules cover its
// events; source is the events' component.
func (e *termEvents) recorder(cb clientBuilder, name, clientName,
	source string) record.EventRecorder {
	e.once.Do(func() { e.ctx, e.cancel = context.WithCancel(context.Background()) })
	// The recorder's client outlives the controllers' context until the
	// term has flushed its events.
	cb.ctx = e.ctx
	client, err := cb.Client(clientName)
	if err != nil {
		e.log.Error(err, "Cannot build the event client; events are written with the host's client",
			"controller", name)
		client = e.host
	}
	r := events.New(kubernetes.Interface(client).CoreV1(), e.gate, name, source, scheme.Scheme,
		e.log.WithValues("controller", name))
	e.mu.Lock()
	e.recs = append(e.recs, r)
	e.mu.Unlock()
	return r.EventRecorder()
}

// stop stops every recorder, waiting for their writes in flight until ctx
// is done. The recorders' clients' context ends with ctx too: a write
// waiting for its controller's ServiceAccount token (minted on that
// context; an oauth2 token source takes no request context) is given up
// with the rest, instead of holding the stop until the mint times out.
func (e *termEvents) stop(ctx context.Context) {
	e.once.Do(func() { e.ctx, e.cancel = context.WithCancel(context.Background()) })
	e.mu.Lock()
	recs := e.recs
	e.recs = nil
	e.mu.Unlock()
	defer e.cancel()
	defer context.AfterFunc(ctx, e.cancel)()
	var wg sync.WaitGroup
	for _, r := range recs {
		wg.Go(func() { r.Stop(ctx) })
	}
	wg.Wait()
}
