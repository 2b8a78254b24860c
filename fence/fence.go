package fence

import (
	"errors"
	"fmt"
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
}

// NewGate returns a Gate for the named term (for example "main (lock
// kube-system/kcm, identity host_1234)"), closed until Extend is called. A nil
// clock means the real clock.
func NewGate(term string, clk clock.PassiveClock) *Gate {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Gate{term: term, clock: clk}
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
	if mutating(req) {
		if err := rt.gate.Check(rt.controller); err != nil {
			if req.Body != nil {
				_ = req.Body.Close() // RoundTrippers must close the body, even on error
			}
			return nil, err
		}
	}
	return rt.next.RoundTrip(req)
}

// WrappedRoundTripper lets client-go's debugging helpers see the transport
// underneath.
func (rt *roundTripper) WrappedRoundTripper() http.RoundTripper { return rt.next }
