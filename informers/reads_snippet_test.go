package informers_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/informers"
)

func newPlacement(context.Context, descriptor.Context) (descriptor.Controller, error) {
	return descriptor.ControllerFunc(func(ctx context.Context) error {
		<-ctx.Done()
		return nil
	}), nil
}

// docs/cache.md's snippet, run as a test; test/docs keeps the two the same.
//
// snippet:begin
var pods = corev1.SchemeGroupVersion.WithResource("pods")

// Descriptor is a controller that reads where pods run and their phase:
// the host keeps only that (and metadata) of each pod in the cache.
func Descriptor() descriptor.Descriptor {
	return descriptor.New("pod-placement", newPlacement).
		WithReads(pods, "spec.nodeName", "status.phase")
}

// Its unit tests cache fixtures as the host would keep them, so that a
// read of a field it did not declare fails here, not in production.
func TestPlacementFixtures(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-0"},
		Spec: corev1.PodSpec{NodeName: "node-a",
			Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7"},
	}
	if err := informers.Fields(Descriptor().Reads()).Prune(pod); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "node-a" || pod.Status.Phase != corev1.PodRunning ||
		pod.Spec.Containers != nil || pod.Status.PodIP != "" {
		t.Fatalf("the cache would hold %+v", pod)
	}
	// … add pod to the informer's store, sync, and check what was written.
}

// snippet:end
