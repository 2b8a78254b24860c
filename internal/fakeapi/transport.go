package fakeapi

import (
	"context"
	"io"
	"net/http"
	"sync"

	"k8s.io/client-go/rest"
)

// Transport returns a RoundTripper that serves each request with h in
// this process: no socket, so that it works inside a testing/synctest
// bubble. A request's context ends its response body (a watch) as a
// closed connection would.
func Transport(h http.Handler) http.RoundTripper { return roundTripper{h} }

// Config returns a client configuration for h (a Server, or a handler in
// front of one) over Transport(h), with wrap, if not nil, applied to the
// transport (fault injection per client). Clients made from it speak JSON.
func Config(h http.Handler, wrap func(http.RoundTripper) http.RoundTripper) *rest.Config {
	rt := Transport(h)
	if wrap != nil {
		rt = wrap(rt)
	}
	return &rest.Config{
		Host:      "http://fakeapi.invalid",
		Transport: rt,
		ContentConfig: rest.ContentConfig{
			ContentType:        "application/json",
			AcceptContentTypes: "application/json",
		},
		QPS:   -1, // no client-side rate limit
		Burst: -1,
	}
}

type roundTripper struct{ h http.Handler }

func (t roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	sreq := req.Clone(ctx)
	sreq.RequestURI = req.URL.RequestURI()
	pr, pw := io.Pipe()
	w := &responseWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			w.start(http.StatusOK)
			_ = pw.Close()
		}()
		t.h.ServeHTTP(w, sreq)
	}()
	select {
	case <-w.ready:
	case <-ctx.Done():
		_ = pr.CloseWithError(ctx.Err())
		return nil, ctx.Err()
	}
	stop := context.AfterFunc(ctx, func() { _ = pr.CloseWithError(ctx.Err()) })
	return &http.Response{
		Status:        http.StatusText(w.code),
		StatusCode:    w.code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.header,
		Body:          &body{r: pr, stop: stop},
		ContentLength: -1,
		Request:       req,
	}, nil
}

type body struct {
	r    *io.PipeReader
	stop func() bool
}

func (b *body) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *body) Close() error {
	b.stop()
	return b.r.Close()
}

// responseWriter hands the status and headers to RoundTrip on the first
// write, and the body through a pipe.
type responseWriter struct {
	header http.Header
	pw     *io.PipeWriter
	once   sync.Once
	code   int
	ready  chan struct{}
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) start(code int) {
	w.once.Do(func() {
		w.code = code
		w.header = w.header.Clone()
		close(w.ready)
	})
}

func (w *responseWriter) WriteHeader(code int) { w.start(code) }

func (w *responseWriter) Write(p []byte) (int, error) {
	w.start(http.StatusOK)
	return w.pw.Write(p)
}

// Flush is a no-op: every Write reaches the reader directly.
func (w *responseWriter) Flush() {}
