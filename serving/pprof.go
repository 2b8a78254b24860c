package serving

import (
	"bufio"
	"bytes"
	"fmt"
	"html"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"sort"
	"strconv"
	"strings"
	"time"
)

// pprofPrefix is where profiles are served, as in KCM and net/http/pprof.
const pprofPrefix = "/debug/pprof/"

// profiling serves the runtime's profiles under pprofPrefix in the formats
// of net/http/pprof, which this package does not import: importing it would
// register unauthenticated handlers on http.DefaultServeMux.
type profiling struct{}

func (profiling) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, pprofPrefix)
	if !ok { // "/debug/pprof"
		http.Redirect(w, r, pprofPrefix, http.StatusMovedPermanently)
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	switch name {
	case "":
		profileIndex(w)
	case "cmdline":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, strings.Join(os.Args, "\x00"))
	case "profile":
		cpuProfile(w, r)
	case "trace":
		executionTrace(w, r)
	case "symbol":
		symbols(w, r)
	default:
		namedProfile(w, r, name)
	}
}

func profileIndex(w http.ResponseWriter) {
	profiles := pprof.Profiles()
	sort.Slice(profiles, func(i, j int) bool { return profiles[i].Name() < profiles[j].Name() })
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	var b bytes.Buffer
	b.WriteString(
		"<html><head><title>/debug/pprof/</title></head><body>\n<p>Profiles:</p>\n<table>\n",
	)
	for _, p := range profiles {
		name := html.EscapeString(p.Name())
		fmt.Fprintf(
			&b,
			"<tr><td>%d</td><td><a href=\"%s?debug=1\">%s</a></td></tr>\n",
			p.Count(),
			name,
			name,
		)
	}
	b.WriteString("<tr><td></td><td><a href=\"cmdline\">cmdline</a></td></tr>\n")
	b.WriteString("<tr><td></td><td><a href=\"profile\">profile</a> (CPU, ?seconds=30)</td></tr>\n")
	b.WriteString("<tr><td></td><td><a href=\"trace\">trace</a> (?seconds=1)</td></tr>\n")
	b.WriteString("</table>\n</body></html>\n")
	_, _ = w.Write(b.Bytes())
}

// seconds reads ?seconds=, default def.
func seconds(r *http.Request, def int) (time.Duration, error) {
	s := r.FormValue("seconds")
	if s == "" {
		return time.Duration(def) * time.Second, nil
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("seconds: want a positive number, got %q", s)
	}
	return time.Duration(n * float64(time.Second)), nil
}

// wait waits for d or for the request to end (client gone, server shutting
// down), whichever comes first.
func wait(r *http.Request, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}

func cpuProfile(w http.ResponseWriter, r *http.Request) {
	d, err := seconds(r, 30)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// Buffered, so that a failure to start is still an HTTP error.
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		http.Error(
			w,
			"could not enable CPU profiling: "+err.Error(),
			http.StatusInternalServerError,
		)
		return
	}
	wait(r, d)
	pprof.StopCPUProfile()
	attachment(w, "profile")
	_, _ = w.Write(buf.Bytes())
}

func executionTrace(w http.ResponseWriter, r *http.Request) {
	d, err := seconds(r, 1)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		http.Error(w, "could not enable tracing: "+err.Error(), http.StatusInternalServerError)
		return
	}
	wait(r, d)
	trace.Stop()
	attachment(w, "trace")
	_, _ = w.Write(buf.Bytes())
}

func namedProfile(w http.ResponseWriter, r *http.Request, name string) {
	p := pprof.Lookup(name)
	if p == nil {
		http.Error(w, "unknown profile "+strconv.Quote(name), http.StatusNotFound)
		return
	}
	debug, _ := strconv.Atoi(r.FormValue("debug"))
	if name == "heap" && r.FormValue("gc") != "" {
		runtime.GC()
	}
	var buf bytes.Buffer
	if err := p.WriteTo(&buf, debug); err != nil {
		http.Error(w, "writing profile: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if debug != 0 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	} else {
		attachment(w, name)
	}
	_, _ = w.Write(buf.Bytes())
}

// symbols answers pprof's symbol lookups: for each hex program counter in
// the POST body (or the query), its function name.
func symbols(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	var b bytes.Buffer
	b.WriteString("num_symbols: 1\n") // tells pprof that lookups work
	var in io.Reader = strings.NewReader(r.URL.RawQuery)
	if r.Method == http.MethodPost {
		in = io.LimitReader(r.Body, 1<<20)
	}
	sc := bufio.NewScanner(in)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.IndexByte(data, '+'); i >= 0 {
			return i + 1, data[:i], nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	})
	for sc.Scan() {
		word := strings.TrimSpace(sc.Text())
		pc, err := strconv.ParseUint(word, 0, 64)
		if err != nil || pc == 0 {
			continue
		}
		if fn := runtime.FuncForPC(uintptr(pc)); fn != nil {
			fmt.Fprintf(&b, "%#x %s\n", pc, fn.Name())
		}
	}
	_, _ = w.Write(b.Bytes())
}

func attachment(w http.ResponseWriter, name string) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
}
