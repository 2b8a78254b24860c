package healthz

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"unicode"
)

// Checker reports the health of one thing; nil means healthy. It must be safe
// to call concurrently and before the thing it checks exists.
type Checker func(req *http.Request) error

// Ping always succeeds.
func Ping(*http.Request) error { return nil }

// Check is a named Checker.
type Check struct {
	// Name identifies the check in output, in /<endpoint>/<name> and in
	// ?exclude=. It must be non-empty and contain no "/", whitespace or
	// control characters.
	Name string
	// Checker runs the check. It must not be nil.
	Checker Checker
}

// Endpoint names one of the three health endpoints.
type Endpoint string

// The endpoints a Handler serves, each at "/" + string(endpoint).
const (
	EndpointHealthz Endpoint = "healthz"
	EndpointLivez   Endpoint = "livez"
	EndpointReadyz  Endpoint = "readyz"
)

// endpoints lists every Endpoint in the order problems and paths are reported.
var endpoints = []Endpoint{EndpointHealthz, EndpointLivez, EndpointReadyz}

func (ep Endpoint) known() bool {
	switch ep {
	case EndpointHealthz, EndpointLivez, EndpointReadyz:
		return true
	}
	return false
}

// pingName is the name of the check served by an endpoint with none registered.
const pingName = "ping"

// Result is the outcome of one check run by [Handler.Check].
type Result struct {
	// Name is the check's name.
	Name string
	// Err is what the Checker returned (or the recovered panic); nil when the
	// check passed or was excluded, a Note when it passed with information.
	Err error
	// Excluded reports that the check was skipped because of ?exclude=.
	Excluded bool
}

// Registry collects checks before the Handler is built. The zero value is
// ready to use. Its methods are safe for concurrent use.
type Registry struct {
	mu   sync.Mutex
	adds []registration
}

type registration struct {
	check Check
	eps   []Endpoint
}

// Add records c for each of eps, after the checks already recorded there.
// It never fails: a duplicate, empty or invalid name, a nil Checker, an
// unknown endpoint or an empty eps is reported by [Registry.Handler], together
// with every other problem.
func (r *Registry) Add(c Check, eps ...Endpoint) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.adds = append(r.adds, registration{check: c, eps: append([]Endpoint(nil), eps...)})
}

// Handler validates every check recorded so far and returns a Handler serving
// them. If anything is invalid it returns a nil Handler and an error joining
// (errors.Join) one error per problem, each naming the check and, where it
// has one, the endpoint. A check is identified by its name, or by its 1-based
// position on the endpoint ("check #2 on /livez") when its name is empty.
//
// The Handler does not see checks added afterwards; call Handler again to
// build a new one.
func (r *Registry) Handler() (*Handler, error) {
	r.mu.Lock()
	adds := append([]registration(nil), r.adds...)
	r.mu.Unlock()

	var errs []error
	perEP := make(map[Endpoint][]Check, len(endpoints))
	for i, a := range adds {
		if len(a.eps) == 0 {
			errs = append(
				errs,
				fmt.Errorf("healthz: check %q added with no endpoint", a.check.Name),
			)
		}
		if a.check.Checker == nil {
			// Once for the check, whatever the number of its endpoints.
			id := fmt.Sprintf("check %q", a.check.Name)
			if a.check.Name == "" {
				id = fmt.Sprintf("check #%d added", i+1)
			}
			paths := make([]string, len(a.eps))
			for j, ep := range a.eps {
				paths[j] = "/" + string(ep)
			}
			errs = append(errs, fmt.Errorf("healthz: %s has a nil Checker (on %s)", id,
				strings.Join(paths, ", ")))
		}
		for _, ep := range a.eps {
			if !ep.known() {
				errs = append(
					errs,
					fmt.Errorf("healthz: check %q added to unknown endpoint %q (want %q, %q or %q)",
						a.check.Name, string(ep), EndpointHealthz, EndpointLivez, EndpointReadyz),
				)
				continue
			}
			perEP[ep] = append(perEP[ep], a.check)
		}
	}

	h := &Handler{endpoints: make(map[Endpoint]*endpoint, len(endpoints))}
	for _, ep := range endpoints {
		checks := perEP[ep]
		errs = append(errs, validate(ep, checks)...)
		if len(checks) == 0 {
			checks = []Check{{Name: pingName, Checker: Ping}}
		}
		e := &endpoint{name: ep, checks: checks, byName: make(map[string]Checker, len(checks))}
		for _, c := range checks {
			e.byName[c.Name] = c.Checker
		}
		h.endpoints[ep] = e
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return h, nil
}

// validate returns one error per problem among the checks of one endpoint.
func validate(ep Endpoint, checks []Check) []error {
	var errs []error
	counts := make(map[string]int, len(checks))
	var dups []string // names seen more than once, in order of their second registration
	for i, c := range checks {
		id := fmt.Sprintf("check %q", c.Name)
		switch {
		case c.Name == "":
			id = fmt.Sprintf("check #%d", i+1)
			errs = append(errs, fmt.Errorf("healthz: %s on /%s has an empty name", id, ep))
		case strings.ContainsFunc(c.Name, invalidNameRune):
			errs = append(
				errs,
				fmt.Errorf(
					"healthz: %s on /%s has an invalid name: it must not contain \"/\", "+
						"whitespace or control characters",
					id,
					ep,
				),
			)
		default:
			if counts[c.Name]++; counts[c.Name] == 2 {
				dups = append(dups, c.Name)
			}
		}
	}
	for _, name := range dups {
		errs = append(
			errs,
			fmt.Errorf("healthz: check %q registered %s on /%s", name, times(counts[name]), ep),
		)
	}
	return errs
}

func invalidNameRune(r rune) bool {
	return r == '/' || unicode.IsSpace(r) || unicode.IsControl(r)
}

// times spells a repetition count: "twice", "3 times".
func times(n int) string {
	if n == 2 {
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}

// Note is a passing result that carries information: a Checker that returns
// a Note (or an error wrapping one) passes, and ?verbose shows the text as
// "[+]name ok: text". A controller host uses it to say why a controller is
// skipped. An errors.Join of several errors passes only when each of them
// does.
type Note string

func (n Note) Error() string { return string(n) }

// Passed reports whether a Checker's result is a pass: nil, a Note, an
// error wrapping a Note, or a join of errors that each pass. A recovered
// panic (a Result's Err) never passes, even one whose value is or wraps a
// Note. Record health (for example in a metric) with Passed(err), not
// err == nil, so that a Note counts as the pass the endpoints show.
func Passed(err error) bool {
	if err == nil {
		return true
	}
	if _, ok := err.(*panicError); ok {
		return false
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !Passed(e) {
				return false
			}
		}
		return true
	}
	if _, ok := err.(Note); ok {
		return true
	}
	inner := errors.Unwrap(err)
	return inner != nil && Passed(inner)
}

func isNote(err error) bool { return err != nil && Passed(err) }

// All returns a Checker that runs each of checkers in order and passes when
// every one passes (see Passed). When some fail, it returns their errors
// joined; otherwise it returns the Notes, joined, or nil. Nil checkers are
// skipped. It lets a host combine, for example, a controller's general and
// readiness-only checks under one name.
func All(checkers ...Checker) Checker {
	return func(req *http.Request) error {
		var failed, notes []error
		for _, c := range checkers {
			if c == nil {
				continue
			}
			switch err := c(req); {
			case err == nil:
			case Passed(err):
				notes = append(notes, err)
			default:
				failed = append(failed, err)
			}
		}
		if len(failed) > 0 {
			return errors.Join(failed...)
		}
		return errors.Join(notes...)
	}
}
