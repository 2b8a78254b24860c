package fence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// ErrFenced is wrapped by every error a Gate returns for a refused write.
var ErrFenced = errors.New("write fenced: the term's lease is not known to be valid")

// Gate decides whether a term's writes may go out. The zero value is not
// usable; create one with NewGate. A nil *Gate lets every write through, for
// terms that run without leader election.
type Gate struct {
	term  string
	clock clock.PassiveClock

	mu     sync.Mutex
	until  time.Time // writes are allowed strictly before this instant
	closed string    // why the gate closed for good; "" while it may open
	// inflight counts the writes that passed the check and have not been
	// answered; idle is closed (and replaced) whenever it drops to zero.
	inflight int
	idle     chan struct{}
	// writes runs the writes whose callers stopped waiting; abandon
	// cancels them (Drain gave up).
	writes  sync.WaitGroup
	abandon context.Context
	cancel  context.CancelFunc
}

// NewGate returns a Gate for the named term (for example "main (lock
// kube-system/kcm, identity host_1234)"), closed until Extend is called. A nil
// clock means the real clock.
func NewGate(term string, clk clock.PassiveClock) *Gate {
	if clk == nil {
		clk = clock.RealClock{}
	}
	g := &Gate{term: term, clock: clk, idle: make(chan struct{})}
	g.abandon, g.cancel = context.WithCancel(context.Background())
	return g
}

// Term names the term the Gate guards.
func (g *Gate) Term() string {
	if g == nil {
		return ""
	}
	return g.term
}

// Extend allows writes until the given instant. It never moves the deadline
// back and has no effect once the Gate is closed.
func (g *Gate) Extend(until time.Time) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed == "" && until.After(g.until) {
		g.until = until
	}
}

// Close refuses every later write, for good; reason says why (for example
// "lease lost" or "term ended"). Closing a closed Gate keeps the first reason.
func (g *Gate) Close(reason string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed == "" {
		if reason == "" {
			reason = "closed"
		}
		g.closed = reason
	}
}

// Check returns nil when controller may write now, and otherwise an error
// wrapping ErrFenced that names the controller, the term and the reason.
func (g *Gate) Check(controller string) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.checkLocked(controller)
}

// checkLocked is Check; g.mu is held.
func (g *Gate) checkLocked(controller string) error {
	var reason string
	switch now := g.clock.Now(); {
	case g.closed != "":
		reason = g.closed
	case g.until.IsZero():
		reason = "the lease has not been acquired"
	case !now.Before(g.until):
		reason = fmt.Sprintf("the lease has not been renewed in time (valid until %s, now %s)",
			g.until.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
	default:
		return nil
	}
	return &Error{Controller: controller, Term: g.term, Reason: reason}
}

// admit checks a write of controller and counts it in flight; done must be
// called once the API server answered it (or it was given up).
func (g *Gate) admit(controller string) (done func(), err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.checkLocked(controller); err != nil {
		return nil, err
	}
	g.inflight++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.inflight--
			if g.inflight == 0 {
				close(g.idle)
				g.idle = make(chan struct{})
			}
		})
	}, nil
}

// InFlight returns how many writes passed the Gate and have not been
// answered by the API server yet, whether or not their callers still
// wait for them.
func (g *Gate) InFlight() int {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inflight
}

// Drain closes the Gate for good (reason as Close's) and waits until every
// write that passed it has been answered by the API server, or ctx is
// done. It returns how many were still in flight then: those it gives up,
// cancelling their requests (the API server may still apply one), and it
// returns only once their goroutines have ended. A term's owner drains its
// Gate before it lets another replica take over (package leader does,
// before it releases the lease), so that no write of the term can be
// applied after the release: a caller that stops waiting for its write
// (its context ended) gets its error at once, but the request goes on
// until the server answers it.
func (g *Gate) Drain(ctx context.Context, reason string) int {
	if g == nil {
		return 0
	}
	g.Close(reason)
	for {
		g.mu.Lock()
		n, idle := g.inflight, g.idle
		g.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-idle:
			continue
		case <-ctx.Done():
		}
		g.cancel()
		g.writes.Wait()
		return n
	}
	g.writes.Wait()
	return 0
}

// Error is the error a refused write returns. It wraps ErrFenced.
type Error struct {
	Controller string // the controller whose client refused the write
	Term       string // the term the Gate guards
	Reason     string // why the Gate refused
}

func (e *Error) Error() string {
	return fmt.Sprintf("controller %q: %v: term %s: %s", e.Controller, ErrFenced, e.Term, e.Reason)
}

// Unwrap makes errors.Is(err, ErrFenced) true.
func (e *Error) Unwrap() error { return ErrFenced }

// Mutating reports whether an HTTP method changes state on the API server.
// The method alone does not tell every write: RoundTripper also refuses
// safe-method requests that open a stream (see RoundTripper).
func Mutating(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, "":
		return false
	}
	return true
}

// mutating reports whether req may change state: a mutating method, a
// request to switch protocols, or a connection to a pod's exec, attach or
// portforward subresource, whatever its method.
func mutating(req *http.Request) bool {
	return Mutating(req.Method) || upgrade(req.Header) || podConnect(req.URL)
}

// upgrade reports whether h belongs to a request that asks to switch
// protocols. client-go's streaming transports add Connection and Upgrade
// underneath the wrappers a rest.Config installs, so from a wrapper a
// WebSocket handshake (exec, attach, port-forward tunneling) is a GET showing
// only its Sec-WebSocket-Protocol, and a SPDY one only its
// X-Stream-Protocol-Version. Requests from other clients (a reverse proxy, a
// hand-built handshake) carry Connection: Upgrade and Upgrade themselves.
func upgrade(h http.Header) bool {
	for _, name := range []string{"Upgrade", "Sec-WebSocket-Protocol", "Sec-WebSocket-Key",
		"X-Stream-Protocol-Version"} {
		if len(h.Values(name)) > 0 {
			return true
		}
	}
	for _, v := range h.Values("Connection") {
		for _, token := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(token), "upgrade") {
				return true
			}
		}
	}
	return false
}

// podConnect reports whether u names a pod's exec, attach or portforward
// subresource: .../api/v1/namespaces/NS/pods/NAME/SUB, after any prefix the
// rest.Config's host carries. The API server runs these for GET as for POST
// and authorizes both as create.
func podConnect(u *url.URL) bool {
	if u == nil {
		return false
	}
	s := strings.Split(strings.Trim(u.Path, "/"), "/")
	n := len(s)
	if n < 7 || s[n-7] != "api" || s[n-6] != "v1" || s[n-5] != "namespaces" ||
		s[n-4] == "" || s[n-3] != "pods" || s[n-2] == "" {
		return false
	}
	switch s[n-1] {
	case "exec", "attach", "portforward":
		return true
	}
	return false
}

// RoundTripper wraps next so that every mutating request is checked against
// g on behalf of controller, and refused before it is sent when the Gate is
// shut. Mutating requests are those with a mutating method (Mutating), those
// that ask to switch protocols (WebSocket or SPDY upgrades, whatever the
// method: exec, attach, port-forward, proxied upgrades) and any request to a
// pod's exec, attach or portforward subresource. A nil Gate returns next
// unchanged.
func RoundTripper(g *Gate, controller string, next http.RoundTripper) http.RoundTripper {
	if g == nil {
		return next
	}
	return &roundTripper{gate: g, controller: controller, next: next}
}

type roundTripper struct {
	gate       *Gate
	controller string
	next       http.RoundTripper
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if !mutating(req) {
		return rt.next.RoundTrip(req)
	}
	done, err := rt.gate.admit(rt.controller)
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close() // RoundTrippers must close the body, even on error
		}
		return nil, err
	}
	return rt.gate.send(rt.next, req, done)
}

// send sends a write that passed the gate and returns its answer, or the
// caller's context error as soon as that ends. The request itself is not
// cancelled with the caller's context: it goes on, on a goroutine the
// Gate tracks, until the API server answers it (its answer is then
// discarded) or Drain gives it up, so that the Gate knows when it was
// applied. done is called once it was answered or given up.
func (g *Gate) send(next http.RoundTripper, req *http.Request,
	done func()) (*http.Response, error) {
	ctx := req.Context()
	out := req.Clone(context.WithoutCancel(ctx))
	if req.Body != nil && req.GetBody != nil {
		// Its own copy of the body: the caller counts its body closed once
		// RoundTrip returned, even while this request still runs.
		if b, err := req.GetBody(); err == nil {
			_ = req.Body.Close()
			out.Body = b
		}
	}
	detached, cancel := context.WithCancel(out.Context())
	stopAbandon := context.AfterFunc(g.abandon, cancel)
	release := func() { stopAbandon(); cancel() }
	out = out.WithContext(detached)
	w := &write{answer: make(chan answer, 1)}
	g.writes.Go(func() {
		defer done()
		resp, err := next.RoundTrip(out)
		if resp != nil {
			// The request's context lives as long as the caller reads the
			// answer's body.
			resp.Body = &releasingBody{ReadCloser: resp.Body, release: release}
		} else {
			release()
		}
		w.deliver(answer{resp, err})
	})
	// Once answered, the write is applied or refused, and the Gate knows
	// which: reading the answer's body is the caller's, and ends with the
	// caller's context, as any request's body read does. (On the write's
	// own context alone, a read held up by a cut connection would keep
	// a controller told to stop from returning.)
	take := func(a answer) (*http.Response, error) {
		if a.resp != nil {
			stop := context.AfterFunc(ctx, cancel)
			a.resp.Body = &releasingBody{ReadCloser: a.resp.Body, release: func() { stop() }}
		}
		return a.resp, a.err
	}
	select {
	case a := <-w.answer:
		return take(a)
	case <-ctx.Done():
		if a, ok := w.leave(); ok {
			return take(a)
		}
		return nil, ctx.Err()
	}
}

// releasingBody is an answer's body that ends its request's context once
// closed.
type releasingBody struct {
	io.ReadCloser
	release func()
	once    sync.Once
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

// write hands a write's answer to its caller, or discards it once the
// caller left.
type write struct {
	answer chan answer // buffered: the sender never blocks
	mu     sync.Mutex
	left   bool
}

type answer struct {
	resp *http.Response
	err  error
}

func (w *write) deliver(a answer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.left {
		if a.resp != nil {
			_, _ = io.Copy(io.Discard, a.resp.Body)
			_ = a.resp.Body.Close()
		}
		return
	}
	w.answer <- a
}

// leave marks the caller gone, unless the answer came meanwhile.
func (w *write) leave() (answer, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case a := <-w.answer:
		return a, true
	default:
		w.left = true
		return answer{}, false
	}
}

// WrappedRoundTripper lets client-go's debugging helpers see the transport
// underneath.
func (rt *roundTripper) WrappedRoundTripper() http.RoundTripper { return rt.next }
