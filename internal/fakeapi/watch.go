package fakeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// watcherBuffer is how many events a watcher may lag behind before the
// server ends its watch (the client lists again), as the API server does
// with a slow watcher.
const watcherBuffer = 1024

type watcher struct {
	gvr  schema.GroupVersionResource
	ns   string
	sel  *selector
	ch   chan event
	once sync.Once
	done chan struct{} // closed when the server ends the watch
	// flush: the events queued when done closed are still sent (set
	// before done closes).
	flush bool
}

// send queues ev as w sees it (see seen); false when the watcher is too
// slow and was closed. The server's mutex is held.
func (w *watcher) send(ev event) bool {
	ev, ok := w.seen(ev)
	if !ok {
		return true
	}
	select {
	case w.ch <- ev:
		return true
	default:
		w.close()
		return false
	}
}

func (w *watcher) close() { w.once.Do(func() { close(w.done) }) }

// end ends the watch once the events queued so far are sent.
func (w *watcher) end() {
	w.once.Do(func() {
		w.flush = true
		close(w.done)
	})
}

// watch streams events to w until the client goes away, the watch times
// out or the server drops it.
func (s *Server) watch(rw http.ResponseWriter, req *http.Request, r *Request, q url.Values) {
	get := q.Get
	sel, err := parseSelector(r.Resource, get("labelSelector"), get("fieldSelector"))
	if err != nil {
		writeStatus(rw, err)
		return
	}
	ns := ""
	if r.Resource.Namespaced {
		ns = r.Namespace
	}
	w := &watcher{
		gvr:  r.Resource.GVR,
		ns:   ns,
		sel:  sel,
		ch:   make(chan event, watcherBuffer),
		done: make(chan struct{}),
	}
	initial := get("sendInitialEvents") == "true"
	rv := get("resourceVersion")

	s.mu.Lock()
	var replay []event
	var bookmarkRV int64
	switch {
	case initial || rv == "" || rv == "0":
		for _, o := range s.listLocked(r.Resource.GVR, ns, sel) {
			replay = append(replay, event{typ: "ADDED", gvr: r.Resource.GVR, obj: o})
		}
		bookmarkRV = s.rv
	default:
		from, err := strconv.ParseInt(rv, 10, 64)
		if err != nil {
			s.mu.Unlock()
			writeStatus(rw, apierrors.NewBadRequest("resourceVersion: "+err.Error()))
			return
		}
		if from < s.oldest {
			s.mu.Unlock()
			// As the API server's watch cache: the watch starts, and its
			// one event is the error.
			expired := statusOf(apierrors.NewResourceExpired(fmt.Sprintf(
				"too old resource version: %d (%d)", from, s.oldest)))
			writeJSON(rw, http.StatusOK, map[string]any{"type": "ERROR", "object": expired})
			return
		}
		for _, ev := range s.history {
			if ev, ok := w.seen(ev); ev.rv > from && ok {
				replay = append(replay, ev)
			}
		}
	}
	s.watchers[w] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watchers, w)
		s.mu.Unlock()
	}()

	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(http.StatusOK)
	flusher, _ := rw.(http.Flusher)
	enc := json.NewEncoder(rw)
	meta := asMetadata(req)
	write := func(typ string, obj map[string]any) bool {
		if meta {
			obj = partialMetadata(obj)
		}
		if err := enc.Encode(map[string]any{"type": typ, "object": obj}); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	for _, ev := range replay {
		if !write(ev.typ, ev.obj) {
			return
		}
	}
	if initial {
		bookmark := map[string]any{
			"apiVersion": r.Resource.GVR.GroupVersion().String(),
			"kind":       r.Resource.Kind,
			"metadata": map[string]any{
				"resourceVersion": strconv.FormatInt(bookmarkRV, 10),
				"annotations":     map[string]any{"k8s.io/initial-events-end": "true"},
			},
		}
		if !write("BOOKMARK", bookmark) {
			return
		}
	}
	var timeout <-chan time.Time
	if secs, err := strconv.Atoi(get("timeoutSeconds")); err == nil && secs > 0 {
		t := time.NewTimer(time.Duration(secs) * time.Second)
		defer t.Stop()
		timeout = t.C
	}
	for {
		select {
		case ev := <-w.ch:
			if !write(ev.typ, ev.obj) {
				return
			}
		case <-w.done:
			for w.flush {
				select {
				case ev := <-w.ch:
					if !write(ev.typ, ev.obj) {
						return
					}
				default:
					return
				}
			}
			return
		case <-timeout:
			return
		case <-req.Context().Done():
			return
		}
	}
}

// seen is ev as w's selectors see it, and whether w sees it at all: a
// MODIFIED event of an object that comes to match them is ADDED, and one
// of an object that stops matching is DELETED, carrying the state it last
// matched in (with the event's resourceVersion), as the API server's watch
// cache sends them.
func (w *watcher) seen(ev event) (event, bool) {
	if ev.gvr != w.gvr || (w.ns != "" && ev.ns != w.ns) {
		return ev, false
	}
	now := w.sel.matches(ev.obj)
	if ev.typ != "MODIFIED" || w.sel == nil {
		return ev, now
	}
	before := w.sel.matches(ev.prev)
	switch {
	case now && !before:
		ev.typ = "ADDED"
	case before && !now:
		ev.typ = "DELETED"
		last := deepCopy(ev.prev)
		metaOf(last)["resourceVersion"] = metaOf(ev.obj)["resourceVersion"]
		ev.obj = last
	}
	return ev, now || before
}
