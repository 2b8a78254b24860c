package fence_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ctrlhost/ctrlhost/fence"
)

func TestGate(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	g := fence.NewGate("main (lock kube-system/x)", clk)

	steps := []struct {
		name    string
		do      func()
		allowed bool
		reason  string
	}{
		{"not acquired yet", func() {}, false, "not been acquired"},
		{"extended", func() { g.Extend(start.Add(time.Second)) }, true, ""},
		{
			"just before the deadline",
			func() { clk.SetTime(start.Add(time.Second - time.Nanosecond)) },
			true,
			"",
		},
		{
			"at the deadline",
			func() { clk.SetTime(start.Add(time.Second)) },
			false,
			"not been renewed in time",
		},
		{
			"an earlier deadline does not move it back",
			func() { g.Extend(start.Add(time.Millisecond)) },
			false,
			"not been renewed in time",
		},
		{"renewed again", func() { g.Extend(start.Add(2 * time.Second)) }, true, ""},
		{"closed", func() { g.Close("lease lost") }, false, "lease lost"},
		{
			"a closed gate never reopens",
			func() { g.Extend(start.Add(time.Hour)) },
			false,
			"lease lost",
		},
		{"the first reason stays", func() { g.Close("term ended") }, false, "lease lost"},
	}
	for _, s := range steps {
		s.do()
		err := g.Check("widget-controller")
		if s.allowed {
			if err != nil {
				t.Fatalf("%s: Check = %v, want nil", s.name, err)
			}
			continue
		}
		if !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("%s: Check = %v, want an error wrapping ErrFenced", s.name, err)
		}
		for _, want := range []string{`"widget-controller"`, "main (lock kube-system/x)", s.reason} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not contain %q", s.name, err, want)
			}
		}
	}
}

func TestNilGateAllowsEverything(t *testing.T) {
	var g *fence.Gate
	g.Extend(time.Now())
	g.Close("x")
	if err := g.Check("c"); err != nil {
		t.Fatalf("nil gate: Check = %v", err)
	}
	rt := http.DefaultTransport
	if got := fence.RoundTripper(nil, "c", rt); got != rt {
		t.Fatal("RoundTripper(nil gate) should return next unchanged")
	}
}

// TestMutating covers the method rule (Mutating) and the request rule the
// fenced transport applies: a shut gate refuses exactly the requests marked
// write and lets the others reach the next transport.
func TestMutating(t *testing.T) {
	for method, want := range map[string]bool{
		"GET": false, "HEAD": false, "OPTIONS": false, "": false,
		"POST": true, "PUT": true, "PATCH": true, "DELETE": true,
	} {
		if got := fence.Mutating(method); got != want {
			t.Errorf("Mutating(%q) = %v, want %v", method, got, want)
		}
	}

	const pod = "/api/v1/namespaces/default/pods/web-0"
	// What client-go's WebSocket executor and tunneling dialer hand to the
	// wrappers around the WebSocket transport: a GET carrying only the
	// subprotocols; Connection and Upgrade are added underneath, by the dialer.
	ws := http.Header{"Sec-Websocket-Protocol": {"v5.channel.k8s.io", "v4.channel.k8s.io"}}
	tunnel := http.Header{"Sec-Websocket-Protocol": {"SPDY/3.1+portforward.k8s.io"}}
	// What a request through an upgrading proxy carries (RFC 9110 7.8).
	upgrade := http.Header{"Connection": {"keep-alive, Upgrade"}, "Upgrade": {"websocket"}}
	spdy := http.Header{"X-Stream-Protocol-Version": {"v4.channel.k8s.io"}}
	tests := []struct {
		name   string
		method string
		path   string
		header http.Header
		write  bool
	}{
		{"get", "GET", pod, nil, false},
		{"watch", "GET", "/api/v1/namespaces/default/pods?watch=true", nil, false},
		{"get a pod named exec", "GET", "/api/v1/namespaces/default/pods/exec", nil, false},
		{"get pod logs", "GET", pod + "/log?follow=true", nil, false},
		{"proxy get", "GET", pod + "/proxy/healthz", nil, false},
		{"post", "POST", "/api/v1/namespaces/default/configmaps", nil, true},
		{"exec over websocket", "GET", pod + "/exec?command=sh&stdin=true&stdout=true", ws, true},
		{"attach over websocket", "GET", pod + "/attach?stdin=true&stdout=true", ws, true},
		{"portforward tunnel", "GET", pod + "/portforward?ports=8080", tunnel, true},
		{"exec over spdy with get", "GET", pod + "/exec?command=sh&stdout=true", spdy, true},
		{"exec without headers", "GET", pod + "/exec?command=sh&stdout=true", nil, true},
		{"attach without headers", "GET", pod + "/attach?stdout=true", nil, true},
		{"portforward without headers", "GET", pod + "/portforward?ports=80", nil, true},
		{"exec behind a path prefix", "GET", "/k8s/c-1" + pod + "/exec?command=sh", nil, true},
		{"upgrade to a pod proxy", "GET", pod + "/proxy/ws", upgrade, true},
		{"upgrade to a service proxy", "GET",
			"/api/v1/namespaces/default/services/web:80/proxy/ws", upgrade, true},
		{"upgrade with only the upgrade header", "GET", pod + "/proxy/ws",
			http.Header{"Upgrade": {"SPDY/3.1"}}, true},
		{"keep-alive is not an upgrade", "GET", pod,
			http.Header{"Connection": {"keep-alive"}}, false},
	}
	g := fence.NewGate("main", nil)
	g.Close("lease lost")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var reached bool
			next := roundTripFunc(func(*http.Request) (*http.Response, error) {
				reached = true
				return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
			})
			req := httptest.NewRequest(tc.method, "https://example.test"+tc.path, nil)
			req.RequestURI = ""
			req.Header = tc.header.Clone()
			if req.Header == nil {
				req.Header = http.Header{}
			}
			resp, err := fence.RoundTripper(g, "c", next).RoundTrip(req)
			if resp != nil {
				_ = resp.Body.Close()
			}
			switch {
			case tc.write && !errors.Is(err, fence.ErrFenced):
				t.Errorf("%s %s on a shut gate: err = %v, want ErrFenced", tc.method, tc.path, err)
			case tc.write && reached:
				t.Errorf("%s %s on a shut gate reached the next transport", tc.method, tc.path)
			case !tc.write && (err != nil || !reached):
				t.Errorf("%s %s: err = %v, reached = %v; want a read that goes through",
					tc.method, tc.path, err, reached)
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestClientThroughGate drives a real client-go clientset over an HTTP
// server: reads always reach it, writes only while the gate is open, and a
// refused write never reaches the network.
func TestClientThroughGate(t *testing.T) {
	var gets, writes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
		} else {
			writes.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(
			[]byte(
				`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default"}}`,
			),
		)
	}))
	defer srv.Close()

	g := fence.NewGate("main", nil)
	cfg := &rest.Config{Host: srv.URL}
	cfg.Wrap(
		func(rt http.RoundTripper) http.RoundTripper { return fence.RoundTripper(g, "mirror", rt) },
	)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.CoreV1().RESTClient().(*rest.RESTClient).Client.CloseIdleConnections()
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps("default")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}

	type op struct {
		name  string
		write bool
		do    func() error
	}
	ops := []op{
		{
			"get",
			false,
			func() error { _, err := cms.Get(ctx, "a", metav1.GetOptions{}); return err },
		},
		{
			"create",
			true,
			func() error { _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); return err },
		},
		{
			"update",
			true,
			func() error { _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); return err },
		},
		{"patch", true, func() error {
			_, err := cms.Patch(
				ctx,
				"a",
				"application/merge-patch+json",
				[]byte(`{}`),
				metav1.PatchOptions{},
			)
			return err
		}},
		{"delete", true, func() error { return cms.Delete(ctx, "a", metav1.DeleteOptions{}) }},
	}
	run := func(open bool) {
		t.Helper()
		for _, o := range ops {
			g0, w0 := gets.Load(), writes.Load()
			err := o.do()
			switch {
			case !o.write || open:
				if err != nil {
					t.Errorf("%s (open=%v): %v", o.name, open, err)
				}
			case !errors.Is(err, fence.ErrFenced):
				t.Errorf("%s on a shut gate: err = %v, want ErrFenced", o.name, err)
			case writes.Load() != w0:
				t.Errorf("%s on a shut gate reached the server", o.name)
			}
			if !o.write && gets.Load() != g0+1 {
				t.Errorf("%s: read did not reach the server", o.name)
			}
		}
	}
	g.Extend(time.Now().Add(time.Hour))
	run(true)
	g.Close("lease lost")
	run(false)
}

// roundTripperFunc is a transport made of a function.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A write whose caller stopped waiting is still in flight until the
// server answers it, and Drain waits for it; one never answered is given
// up when Drain's context ends (its request cancelled), and counted.
func TestDrainWaitsForWritesWhoseCallersLeft(t *testing.T) {
	for _, answered := range []bool{true, false} {
		t.Run(map[bool]string{true: "answered", false: "given up"}[answered], func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Now())
			g := fence.NewGate("main", clk)
			g.Extend(clk.Now().Add(time.Hour))
			arrived, answer := make(chan struct{}), make(chan struct{})
			var cancelled atomic.Bool
			server := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				close(arrived)
				select {
				case <-answer:
					return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
				case <-r.Context().Done():
					cancelled.Store(true)
					return nil, r.Context().Err()
				}
			})
			rt := fence.RoundTripper(g, "writer", server)
			ctx, cancel := context.WithCancel(context.Background())
			req := httptest.NewRequestWithContext(
				ctx,
				http.MethodPost,
				"http://x/api/v1/namespaces/a/configmaps",
				strings.NewReader("{}"),
			)
			sent := make(chan error, 1)
			go func() {
				_, err := rt.RoundTrip(req)
				sent <- err
			}()
			<-arrived
			cancel()
			if err := <-sent; !errors.Is(err, context.Canceled) {
				t.Fatalf("the caller got %v, want context.Canceled at once", err)
			}
			if n := g.InFlight(); n != 1 {
				t.Fatalf(
					"InFlight = %d once the caller left, want 1: the server has not answered",
					n,
				)
			}
			drain, stop := context.WithCancel(context.Background())
			if answered {
				close(answer)
			} else {
				stop()
			}
			n := g.Drain(drain, "term ended")
			stop()
			if want := map[bool]int{true: 0, false: 1}[answered]; n != want || g.InFlight() != 0 {
				t.Errorf("Drain = %d (InFlight %d after), want %d", n, g.InFlight(), want)
			}
			if cancelled.Load() == answered {
				t.Errorf("the request was cancelled: %v, want %v", cancelled.Load(), !answered)
			}
			if err := g.Check("writer"); err == nil ||
				!strings.Contains(err.Error(), "term ended") {
				t.Errorf("after Drain the gate answers %v, want it closed", err)
			}
		})
	}
}

// ctxBody is an answer's body whose data does not come (a connection cut
// after the headers): a read returns only when the request's context
// ends, as net/http's does.
type ctxBody struct{ ctx context.Context }

func (b ctxBody) Read([]byte) (int, error) {
	<-b.ctx.Done()
	return 0, b.ctx.Err()
}

func (ctxBody) Close() error { return nil }

// A write goes on after its caller left, until the server answers, so
// that the Gate knows whether it was applied. Once answered, reading the
// answer's body is the caller's: it ends with the caller's context, as any
// request's body read does. Before, it ran on the write's detached context,
// and a controller told to stop while a partition held its answer's data
// could not return (simulation seed 352).
func TestReadingAnAnswerEndsWithTheCallersContext(t *testing.T) {
	synctest.Test(t, readingAnAnswerEndsWithTheCallersContext)
}

func readingAnAnswerEndsWithTheCallersContext(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	g := fence.NewGate("main", clk)
	g.Extend(clk.Now().Add(time.Hour))
	server := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: ctxBody{r.Context()}}, nil
	})
	rt := fence.RoundTripper(g, "writer", server)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodPut,
		"http://x/api/v1/namespaces/a/configmaps/c", strings.NewReader("{}"))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if n := g.InFlight(); n != 0 {
		t.Errorf("InFlight = %d once the server answered, want 0", n)
	}
	read := make(chan error, 1)
	go func() {
		_, err := resp.Body.Read(make([]byte, 1))
		read <- err
	}()
	cancel()
	timer := time.NewTimer(time.Minute)
	defer timer.Stop()
	select {
	case err := <-read:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the read returned %v, want context.Canceled", err)
		}
	case <-timer.C:
		t.Fatal("the read of the answer's body goes on a minute after the caller's context ended")
	}
	_ = resp.Body.Close()
}
