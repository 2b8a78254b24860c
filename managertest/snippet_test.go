package managertest_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

// mine and seedObjects stand for docs/testing.md's controller package and
// its fixtures.
var (
	mine = struct{ Descriptor func() descriptor.Descriptor }{
		Descriptor: func() descriptor.Descriptor {
			return descriptor.New("my-controller",
				func(context.Context, descriptor.Context) (descriptor.Controller, error) {
					return descriptor.ControllerFunc(func(ctx context.Context) error {
						<-ctx.Done()
						return nil
					}), nil
				})
		},
	}
	seedObjects = []runtime.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "seed"}},
	}
)

// TestMyController is docs/testing.md's unit-test snippet, run as a test;
// test/docs keeps the two the same.
//
// snippet:begin
func TestMyController(t *testing.T) {
	h := managertest.New(t, "test", []descriptor.Descriptor{mine.Descriptor()}, seedObjects...).
		Start()
	h.WaitRunning("my-controller")
	h.WaitHealthy("/readyz")
	// act on h.Client (a *fake.Clientset), poll for the result …
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// snippet:end
