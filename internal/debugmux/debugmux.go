// Package debugmux serves controllers' debugging pages, KCM's
// /debug/controllers/<name>/, with an index of those served now.
//
// Guarantees: a request reaches a controller's DebuggingHandler with the
// "<prefix><name>" part of the path stripped; an unknown name, a controller
// without a handler, and a nil handler answer 404; a known controller that is
// not running answers 503; the index lists, one per line and in the order
// the names come, the paths of the handlers served at that moment.
//
// Non-guarantees: no authentication or authorization (the server mounting
// the handler decides that); a controller that stops between the lookup and
// the request still gets it.
package debugmux

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Lookup returns the running controller of that name (nil when it is not
// running) and whether the name is known at all.
type Lookup func(name string) (c descriptor.Controller, known bool)

// New returns a handler for paths under prefix (for example
// "/debug/controllers/"); names lists the known controllers for the index.
func New(prefix string, names func() []string, lookup Lookup) http.Handler {
	return &mux{prefix: prefix, names: names, lookup: lookup}
}

type mux struct {
	prefix string
	names  func() []string
	lookup Lookup
}

func (m *mux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, m.prefix), "/")
	if name == "" {
		m.index(w)
		return
	}
	c, known := m.lookup(name)
	switch h := handlerOf(c); {
	case !known:
		http.NotFound(w, r)
	case c == nil:
		http.Error(w, fmt.Sprintf("controller %q is not running", name), http.StatusServiceUnavailable)
	case h == nil:
		http.NotFound(w, r)
	default:
		http.StripPrefix(m.prefix+name, h).ServeHTTP(w, r)
	}
}

func (m *mux) index(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	for _, name := range m.names() {
		if c, _ := m.lookup(name); handlerOf(c) != nil {
			fmt.Fprintf(w, "%s%s/\n", m.prefix, name)
		}
	}
}

// handlerOf is c's debugging handler, nil when it has none.
func handlerOf(c descriptor.Controller) http.Handler {
	if d, ok := c.(descriptor.Debuggable); ok {
		return d.DebuggingHandler()
	}
	return nil
}
