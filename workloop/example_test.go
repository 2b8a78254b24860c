package workloop_test

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ctrlhost/ctrlhost/workloop"
)

// Example is docs/workloop.md's snippet, compiled and run here; test/docs
// keeps the two the same. It builds a
// loop over a fake clientset; in an InitFunc the informers come from
// descriptor.Context and the *Loop is returned as the controller.
func Example() {
	client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: "default", Name: "settings", Labels: map[string]string{"mirror.ctrlhost.io/to": "prod"}}})
	factory := informers.NewSharedInformerFactory(client, 0)
	cms := factory.Core().V1().ConfigMaps()
	synced := make(chan string, 1)

	// snippet:begin
	sync := func(ctx context.Context, key string) error {
		synced <- key // a real sync reads cms.Lister() and writes through the client
		return nil
	}
	loop := workloop.New("configmap-mirror", sync, workloop.Options{Workers: 2})
	selector := labels.SelectorFromSet(labels.Set{"mirror.ctrlhost.io/to": "prod"})
	if err := loop.Watch(cms.Informer(), workloop.EnqueueKey(),
		workloop.MatchingLabels(selector), workloop.ResourceVersionChanged()); err != nil {
		fmt.Println(err)
		return
	}
	// return loop, nil // from an InitFunc: *workloop.Loop is a descriptor.Controller
	// snippet:end

	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	fmt.Println("synced", <-synced)
	cancel()
	fmt.Println("run:", <-done)
	factory.Shutdown()
	// Output:
	// synced default/settings
	// run: <nil>
}

func ExampleEnqueueOwner() {
	isController := true
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-x7k2p",
		OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", Controller: &isController},
		}}}
	toReplicaSet := workloop.EnqueueOwner(appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))
	fmt.Println(toReplicaSet(pod))
	// Output: [default/web]
}

func ExampleLoop_Wrote() {
	loop := workloop.New(
		"example",
		func(context.Context, string) error { return nil },
		workloop.Options{},
	)
	defer loop.ShutDown()
	// After a write, record what the API server returned ...
	written := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       "prod",
			Name:            "settings",
			UID:             "u1",
			ResourceVersion: "42",
		},
	}
	loop.Wrote("default/settings", written)
	fmt.Println("stale:", loop.Stale("default/settings"))
	// ... until an informer feeding the loop (Watch calls Observe) delivers it.
	loop.Observe(written)
	fmt.Println("stale:", loop.Stale("default/settings"))
	// Output:
	// stale: true
	// stale: false
}

func ExamplePermanent() {
	err := workloop.Permanent(fmt.Errorf("spec.selector: invalid"))
	fmt.Println(workloop.IsPermanent(err), workloop.IsPermanent(fmt.Errorf("sync: %w", err)))
	// Output: true true
}
