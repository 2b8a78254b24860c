package manager_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/serving"
)

var discard = logr.Discard()

// waitAllRunning spins (yielding) until every controller of m runs.
func waitAllRunning(m *manager.Manager) {
	for {
		running := 0
		for _, st := range m.Controllers() {
			if st.Phase == manager.PhaseRunning {
				running++
			}
		}
		if running == len(m.Controllers()) {
			return
		}
		runtime.Gosched()
	}
}

// benchDescriptors are n controllers that block until their term ends.
func benchDescriptors(n int) []descriptor.Descriptor {
	var ds []descriptor.Descriptor
	for i := range n {
		ds = append(ds, descriptor.New(fmt.Sprintf("c%d", i), func(context.Context, descriptor.Context) (descriptor.Controller, error) {
			return descriptor.ControllerFunc(func(ctx context.Context) error { <-ctx.Done(); return nil }), nil
		}))
	}
	return ds
}

// startBench builds a Manager of ds over fakes and runs it until every
// controller runs; stop cancels Run and returns its error.
func startBench(b *testing.B, ds []descriptor.Descriptor) (m *manager.Manager, stop func() error) {
	m, err := manager.NewBuilder("bench").WithClient(fake.NewClientset(), nil).
		WithOptions(manager.Options{Serving: serving.Options{SecurePort: serving.PortDisabled}}).
		WithLogger(discard).Register(ds...).Build()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	waitAllRunning(m)
	return m, func() error { cancel(); return <-done }
}

// BenchmarkTermStartStop is one term of 20 controllers over fakes: Build,
// Run until every controller runs, cancel, Run returns.
func BenchmarkTermStartStop(b *testing.B) {
	ds := benchDescriptors(20)
	b.ReportAllocs()
	for b.Loop() {
		_, stop := startBench(b, ds)
		if err := stop(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadyzVerbose answers /readyz?verbose for 50 running controllers.
func BenchmarkReadyzVerbose(b *testing.B) {
	m, stop := startBench(b, benchDescriptors(50))
	defer func() {
		if err := stop(); err != nil {
			b.Error(err)
		}
	}()
	h := m.Handler()
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz?verbose", nil))
		if rec.Code != 200 && rec.Code != 500 {
			b.Fatalf("readyz: %d", rec.Code)
		}
	}
}
