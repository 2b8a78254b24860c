package fence_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
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
		{"just before the deadline", func() { clk.SetTime(start.Add(time.Second - time.Nanosecond)) }, true, ""},
		{"at the deadline", func() { clk.SetTime(start.Add(time.Second)) }, false, "not been renewed in time"},
		{"an earlier deadline does not move it back", func() { g.Extend(start.Add(time.Millisecond)) }, false, "not been renewed in time"},
		{"renewed again", func() { g.Extend(start.Add(2 * time.Second)) }, true, ""},
		{"closed", func() { g.Close("lease lost") }, false, "lease lost"},
		{"a closed gate never reopens", func() { g.Extend(start.Add(time.Hour)) }, false, "lease lost"},
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

func TestMutating(t *testing.T) {
	for method, want := range map[string]bool{
		"GET": false, "HEAD": false, "OPTIONS": false, "": false,
		"POST": true, "PUT": true, "PATCH": true, "DELETE": true,
	} {
		if got := fence.Mutating(method); got != want {
			t.Errorf("Mutating(%q) = %v, want %v", method, got, want)
		}
	}
}

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
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default"}}`))
	}))
	defer srv.Close()

	g := fence.NewGate("main", nil)
	cfg := &rest.Config{Host: srv.URL}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return fence.RoundTripper(g, "mirror", rt) })
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
		{"get", false, func() error { _, err := cms.Get(ctx, "a", metav1.GetOptions{}); return err }},
		{"create", true, func() error { _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); return err }},
		{"update", true, func() error { _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); return err }},
		{"patch", true, func() error {
			_, err := cms.Patch(ctx, "a", "application/merge-patch+json", []byte(`{}`), metav1.PatchOptions{})
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

func TestRecorderDropsEventsOnceFenced(t *testing.T) {
	fake := record.NewFakeRecorder(10)
	g := fence.NewGate("main", nil)
	g.Extend(time.Now().Add(time.Hour))
	var dropped []error
	rec := fence.Recorder(g, "mirror", fake, func(err error) { dropped = append(dropped, err) })
	pod := &corev1.Pod{}
	rec.Event(pod, corev1.EventTypeNormal, "Before", "kept")
	g.Close("term ended")
	rec.Event(pod, corev1.EventTypeNormal, "After", "dropped")
	rec.Eventf(pod, corev1.EventTypeNormal, "After", "dropped %d", 1)
	rec.AnnotatedEventf(pod, nil, corev1.EventTypeNormal, "After", "dropped")
	if got := len(fake.Events); got != 1 {
		t.Fatalf("recorded %d events, want 1", got)
	}
	if got := <-fake.Events; !strings.Contains(got, "Before") {
		t.Errorf("recorded %q, want the event from before the gate closed", got)
	}
	if len(dropped) != 3 || !errors.Is(dropped[0], fence.ErrFenced) {
		t.Errorf("dropped = %v, want 3 ErrFenced errors", dropped)
	}
}
