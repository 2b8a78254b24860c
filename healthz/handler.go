package healthz

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Handler serves the three endpoints. It is immutable once built and safe for
// concurrent use. Build it with [Registry.Handler].
type Handler struct {
	endpoints map[Endpoint]*endpoint
}

// endpoint is the frozen list of checks of one Endpoint.
type endpoint struct {
	name   Endpoint
	checks []Check
	byName map[string]Checker
}

var _ http.Handler = (*Handler)(nil)

// ServeHTTP serves /healthz, /livez, /readyz and their /<name> sub-paths;
// any other path is a 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ep, name, sub, found := h.route(r.URL.Path)
	if !found {
		reply(w, r, http.StatusNotFound, "404 page not found\n")
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		reply(w, r, http.StatusMethodNotAllowed, "405 method not allowed\n")
		return
	}
	if sub {
		h.serveOne(w, r, ep, name)
		return
	}
	h.serveAll(w, r, ep)
}

// route splits path into its endpoint and, for a sub-path, check name.
func (h *Handler) route(path string) (ep *endpoint, name string, sub, found bool) {
	rest, ok := strings.CutPrefix(path, "/")
	if !ok {
		return nil, "", false, false
	}
	epName, name, sub := strings.Cut(rest, "/")
	ep, ok = h.endpoints[Endpoint(epName)]
	if !ok {
		return nil, "", false, false
	}
	if sub {
		if _, ok := ep.byName[name]; !ok {
			return nil, "", false, false
		}
	}
	return ep, name, sub, true
}

func (h *Handler) serveOne(w http.ResponseWriter, r *http.Request, ep *endpoint, name string) {
	if err := run(ep.byName[name], r); err != nil && !isNote(err) {
		reply(w, r, http.StatusInternalServerError, fmt.Sprintf("internal server error: %v\n", err))
		return
	}
	reply(w, r, http.StatusOK, "ok")
}

func (h *Handler) serveAll(w http.ResponseWriter, r *http.Request, ep *endpoint) {
	query := r.URL.Query()
	_, verbose := query["verbose"]
	ok, results := ep.run(r)
	if ok && !verbose {
		reply(w, r, http.StatusOK, "ok")
		return
	}

	var b strings.Builder
	for _, res := range results {
		switch {
		case res.Excluded:
			fmt.Fprintf(&b, "[+]%s excluded: ok\n", res.Name)
		case res.Err == nil:
			fmt.Fprintf(&b, "[+]%s ok\n", res.Name)
		case isNote(res.Err):
			fmt.Fprintf(&b, "[+]%s ok: %v\n", res.Name, res.Err)
		case verbose:
			fmt.Fprintf(&b, "[-]%s failed: %v\n", res.Name, res.Err)
		default:
			fmt.Fprintf(&b, "[-]%s failed: reason withheld\n", res.Name)
		}
	}
	if unknown := ep.unknownExcludes(query["exclude"]); len(unknown) > 0 {
		quoted := make([]string, len(unknown))
		for i, name := range unknown {
			quoted[i] = strconv.Quote(name)
		}
		fmt.Fprintf(
			&b,
			"warn: some health checks cannot be excluded: no matches for %s\n",
			strings.Join(quoted, ","),
		)
	}
	if !ok {
		fmt.Fprintf(&b, "%s check failed\n", ep.name)
		reply(w, r, http.StatusInternalServerError, b.String())
		return
	}
	fmt.Fprintf(&b, "%s check passed\n", ep.name)
	reply(w, r, http.StatusOK, b.String())
}

// reply writes a complete plain-text response. For HEAD the body is counted
// in Content-Length but not sent.
func reply(w http.ResponseWriter, r *http.Request, code int, body string) {
	hdr := w.Header()
	hdr.Set("Content-Type", "text/plain; charset=utf-8")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		_, _ = w.Write([]byte(body)) // the client went away; nothing to do
	}
}

// Paths returns every path the Handler serves, sorted.
func (h *Handler) Paths() []string {
	var paths []string
	for _, ep := range h.endpoints {
		paths = append(paths, "/"+string(ep.name))
		for _, c := range ep.checks {
			paths = append(paths, "/"+string(ep.name)+"/"+c.Name)
		}
	}
	slices.Sort(paths)
	return paths
}

// Check runs the checks of ep as a GET of /<ep> would, honouring the exclude
// query parameters of req, and reports whether all that ran passed, with one
// Result per check in registration order. req is passed to every Checker; if
// it is nil, a GET of /<ep> with a background context is used. An unknown
// endpoint reports false and no results.
func (h *Handler) Check(ep Endpoint, req *http.Request) (ok bool, results []Result) {
	e, found := h.endpoints[ep]
	if !found {
		return false, nil
	}
	if req == nil {
		var err error
		req, err = http.NewRequestWithContext(
			context.Background(),
			http.MethodGet,
			"/"+string(ep),
			nil,
		)
		if err != nil {
			// Unreachable: the URL is a known endpoint path.
			return false, []Result{{Name: string(ep), Err: err}}
		}
	}
	return e.run(req)
}

// run runs every check of e, skipping those excluded by req.
func (e *endpoint) run(req *http.Request) (ok bool, results []Result) {
	var excluded []string
	if req.URL != nil {
		excluded = req.URL.Query()["exclude"]
	}
	ok = true
	results = make([]Result, 0, len(e.checks))
	for _, c := range e.checks {
		if slices.Contains(excluded, c.Name) {
			results = append(results, Result{Name: c.Name, Excluded: true})
			continue
		}
		err := run(c.Checker, req)
		if err != nil && !isNote(err) {
			ok = false
		}
		results = append(results, Result{Name: c.Name, Err: err})
	}
	return ok, results
}

// unknownExcludes returns the sorted, distinct names in excluded that match no
// check of e.
func (e *endpoint) unknownExcludes(excluded []string) []string {
	var unknown []string
	for _, name := range excluded {
		if _, found := e.byName[name]; !found {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	return slices.Compact(unknown)
}

// run calls c, turning a panic into an error that always fails (see
// panicError), whatever the panic's value. It tells a panic from a return by
// whether c returned, not by recover's result, which is nil for panic(nil)
// under GODEBUG=panicnil=1.
func run(c Checker, req *http.Request) (err error) {
	returned := false
	defer func() {
		if !returned {
			err = &panicError{value: recover()}
		}
	}()
	err = c(req)
	returned = true
	return err
}

// panicError is a Checker's recovered panic. It fails even when the value is
// a Note or wraps one (see Passed), and unwraps to the value when that is an
// error, so that errors.Is and errors.As see it.
type panicError struct {
	value any
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }

func (e *panicError) Unwrap() error {
	err, _ := e.value.(error)
	return err
}
