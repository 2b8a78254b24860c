// Package zpages serves /statusz and /flagz as kube-controller-manager
// v1.37 does (k8s.io/apiserver's statusz and flagz, on by default since
// the ComponentStatusz and ComponentFlagz gates went beta): a plain-text
// page for people, and, to a client whose Accept header asks for one,
// the structured config.k8s.io Statusz or Flagz object (v1beta1, or the
// deprecated v1alpha1 with a Warning header) as JSON.
//
// Guarantees: the text pages carry KCM's header and warning, the fields
// in KCM's order, and one of KCM's delimiters (chosen at random per
// response, as KCM does, so that nobody parses the text); a flag marked
// classified (the "classified" annotation) reads CLASSIFIED; an Accept
// header the pages cannot answer gets 406 and a body that says what they
// can; only GET and HEAD are served.
//
// Non-guarantees: YAML and CBOR are not offered (KCM offers them); the
// request metrics KCM records for these paths are not recorded.
package zpages

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"mime"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// The paths, as KCM serves them.
const (
	StatuszPath = "/statusz"
	FlagzPath   = "/flagz"
)

// group is the API group of the structured pages.
const group = "config.k8s.io"

// delimiters are KCM's, one chosen per response.
var delimiters = []string{":", ": ", "=", " "}

// warning is KCM's line under each text page's title.
const warning = "Warning: This endpoint is not meant to be machine parseable, has no " +
	"formatting compatibility guarantees and is for debugging purposes only."

// Status is what /statusz reports.
type Status struct {
	// Component names the program (the title line, metadata.name).
	Component string
	// Start is when the program started.
	Start time.Time
	// BinaryVersion is the program's version.
	BinaryVersion string
	// EmulationVersion, if set, is the Kubernetes version it emulates.
	EmulationVersion string
	// Paths returns the paths the server serves; /statusz shows their
	// first segments, sorted, once each.
	Paths func() []string
}

// Statusz serves s at /statusz.
func Statusz(s Status) http.Handler {
	return page{kind: "Statusz", component: s.Component,
		text: func(delim string) string { return statusText(s, delim) },
		object: func() map[string]any {
			return map[string]any{
				"startTime":        s.Start.UTC().Format(time.RFC3339),
				"uptimeSeconds":    max(0, int64(time.Since(s.Start).Seconds())),
				"goVersion":        runtime.Version(),
				"binaryVersion":    s.BinaryVersion,
				"emulationVersion": s.EmulationVersion,
				"paths":            s.paths(),
			}
		}}
}

// Flagz serves at /flagz the flags flags returns (name → value, as
// FlagValues reads them).
func Flagz(component string, flags func() map[string]string) http.Handler {
	return page{kind: "Flagz", component: component,
		text: func(delim string) string {
			f := flags()
			names := make([]string, 0, len(f))
			for n := range f {
				names = append(names, n)
			}
			slices.Sort(names)
			var b strings.Builder
			for _, n := range names {
				fmt.Fprintf(&b, "%s%s%s\n", n, delim, f[n])
			}
			return b.String()
		},
		object: func() map[string]any { return map[string]any{"flags": flags()} }}
}

// FlagValues reads the flags of every set, by name: their values as
// parsed (or their defaults), CLASSIFIED for a flag annotated
// "classified", as KCM's /flagz does.
func FlagValues(sets ...*pflag.FlagSet) map[string]string {
	out := map[string]string{}
	for _, fs := range sets {
		if fs == nil {
			continue
		}
		fs.VisitAll(func(f *pflag.Flag) {
			if f.Value == nil {
				return
			}
			v := f.Value.String()
			if len(f.Annotations["classified"]) > 0 {
				v = "CLASSIFIED"
			}
			out[f.Name] = v
		})
	}
	return out
}

func (s Status) paths() []string {
	if s.Paths == nil {
		return []string{}
	}
	seen := map[string]bool{}
	out := []string{}
	for _, p := range s.Paths() {
		parts := strings.Split(p, "/")
		if len(parts) < 2 || parts[1] == "" {
			continue
		}
		if first := "/" + parts[1]; !seen[first] {
			seen[first] = true
			out = append(out, first)
		}
	}
	slices.Sort(out)
	return out
}

func statusText(s Status, delim string) string {
	up := int64(time.Since(s.Start).Seconds())
	var b strings.Builder
	fmt.Fprintf(&b, "\nStarted%s %s\n", delim, s.Start.Format(time.UnixDate))
	fmt.Fprintf(&b, "Up%s %d hr %02d min %02d sec\n", delim, up/3600, (up/60)%60, up%60)
	fmt.Fprintf(&b, "Go version%s %s\n", delim, runtime.Version())
	fmt.Fprintf(&b, "Binary version%s %s\n", delim, s.BinaryVersion)
	if s.EmulationVersion != "" {
		fmt.Fprintf(&b, "Emulation version%s %s\n", delim, s.EmulationVersion)
	} else {
		b.WriteString("\n")
	}
	if p := s.paths(); len(p) > 0 {
		fmt.Fprintf(&b, "Paths%s %s\n", delim, strings.Join(p, " "))
	} else {
		b.WriteString("\n")
	}
	return b.String()
}

// page is one z-page: its text and its structured object.
type page struct {
	kind      string // Statusz or Flagz
	component string
	text      func(delim string) string
	object    func() map[string]any // the kind's fields, without TypeMeta and metadata
}

func (p page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed: use GET", http.StatusMethodNotAllowed)
		return
	}
	version, ok := p.negotiate(r.Header.Get("Accept"))
	if !ok {
		http.Error(w, fmt.Sprintf("none of the media types in Accept %q is served: ask for "+
			"text/plain, or application/json;as=%s;v=v1beta1;g=%s", r.Header.Get("Accept"),
			p.kind, group), http.StatusNotAcceptable)
		return
	}
	if version == "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		delim := delimiters[rand.IntN(len(delimiters))]
		fmt.Fprintf(w, "\n%s %s\n%s\n%s", p.component, strings.ToLower(p.kind), warning,
			p.text(delim))
		return
	}
	if version == "v1alpha1" {
		w.Header().Set("Warning", fmt.Sprintf(`299 - "This version of the %s endpoint is `+
			`deprecated. Please use a newer version."`, strings.ToLower(p.kind)))
	}
	obj := p.object()
	obj["kind"] = p.kind
	obj["apiVersion"] = group + "/" + version
	obj["metadata"] = map[string]any{"name": p.component}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(obj)
}

// negotiate picks what to answer an Accept header with: "" for the text
// page, a version for the structured object, or false for nothing. The
// first media range it can answer wins.
func (p page) negotiate(accept string) (string, bool) {
	if strings.TrimSpace(accept) == "" {
		return "", true
	}
	for _, r := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(r))
		if err != nil {
			continue
		}
		switch mt {
		case "text/plain", "text/*", "*/*":
			if params["as"] == "" {
				return "", true
			}
		case "application/json":
			v := params["v"]
			known := v == "v1beta1" || v == "v1alpha1"
			if params["as"] == p.kind && params["g"] == group && known {
				return v, true
			}
		}
	}
	return "", false
}
