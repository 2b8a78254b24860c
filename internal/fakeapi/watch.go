package fakeapi

import (
	"encoding/json"
	"net/http"
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
}

// send queues ev if it matches; false when the watcher is too slow and
// was closed. The server's mutex is held.
func (w *watcher) send(ev event) bool {
	if ev.gvr != w.gvr || (w.ns != "" && ev.ns != w.ns) || !w.sel.matches(ev.obj) {
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

// watch streams events to w until the client goes away, the watch times
// out or the server drops it.
func (s *Server) watch(rw http.ResponseWriter, req *http.Request, r *Request, get func(string) string) {
	sel, err := parseSelector(get("labelSelector"), get("fieldSelector"))
	if err != nil {
		writeStatus(rw, err)
		return
	}
	ns := ""
	if r.Resource.Namespaced {
		ns = r.Namespace
	}
	w := &watcher{gvr: r.Resource.GVR, ns: ns, sel: sel, ch: make(chan event, watcherBuffer), done: make(chan struct{})}
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
			writeStatus(rw, apierrors.NewResourceExpired("too old resource version: "+rv))
			return
		}
		for _, ev := range s.history {
			if ev.rv > from && w.wants(ev) {
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
			return
		case <-timeout:
			return
		case <-requestContext(req).Done():
			return
		}
	}
}

func (w *watcher) wants(ev event) bool {
	return ev.gvr == w.gvr && (w.ns == "" || ev.ns == w.ns) && w.sel.matches(ev.obj)
}
