package managertest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

// podCounter is a tiny controller: it counts the pods in its informer.
func podCounter(counted chan<- int) descriptor.Descriptor {
	return descriptor.New(
		"pod-counter",
		func(ctx context.Context, cc descriptor.Context) (descriptor.Controller, error) {
			pods := cc.InformerFactory.Core().V1().Pods()
			synced := pods.Informer().HasSynced
			return descriptor.ControllerFunc(func(ctx context.Context) error {
				<-cc.InformersStarted
				if !cache.WaitForCacheSync(ctx.Done(), synced) {
					return nil // stopped before the cache synced
				}
				list, err := pods.Lister().List(labels.Everything())
				if err != nil {
					return err
				}
				counted <- len(list)
				<-ctx.Done()
				return nil
			}), nil
		},
	)
}

func Example() {
	t := &testing.T{} // in a real test, the *testing.T you are given
	counted := make(chan int, 1)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}

	h := managertest.New(t, "example-manager", []descriptor.Descriptor{podCounter(counted)}, pod).
		Start()
	h.WaitRunning("pod-counter")
	select {
	case n := <-counted:
		fmt.Println("pods:", n)
	case <-time.After(managertest.DefaultTimeout):
		fmt.Println("pod-counter did not count within", managertest.DefaultTimeout)
	}
	code, _ := h.Get("/healthz")
	fmt.Println("healthz:", code)
	fmt.Println("stop error:", h.Stop())
	// Output:
	// pods: 1
	// healthz: 200
	// stop error: <nil>
}
