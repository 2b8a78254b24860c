package managertest_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

// TestWatches: a controller's informer's watch counts as open while it
// runs, and no longer once the Manager stopped.
func TestWatches(t *testing.T) {
	init := func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		cc.InformerFactory.Core().V1().ConfigMaps().Informer()
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			<-ctx.Done()
			return nil
		}), nil
	}
	h := managertest.New(t, "test", []descriptor.Descriptor{descriptor.New("cm-controller", init)})
	if n := h.Watches("configmaps"); n != 0 {
		t.Fatalf("Watches before Start = %d", n)
	}
	h.Start()
	managertest.Eventually(t, "the ConfigMaps watch is open", func() bool {
		return h.Watches("configmaps") == 1
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "the ConfigMaps watch is closed", func() bool {
		return h.Watches("configmaps") == 0
	})
}

// TestWatchResumesFromTheListsResourceVersion: an object created between a
// LIST and a WATCH from that list's resourceVersion reaches the watch, as
// it does from an API server. The fake clientset's tracker delivers it when
// the watch carries its ListOptions; the Harness's reactors dropped them,
// so an informer lost a write (even its controller's own) made in that gap.
func TestWatchResumesFromTheListsResourceVersion(t *testing.T) {
	h := managertest.New(t, "test", nil)
	ctx := context.Background()
	cms := h.Client.CoreV1().ConfigMaps("ns")
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "in-the-gap"}}
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case e := <-w.ResultChan():
		got, ok := e.Object.(*corev1.ConfigMap)
		if e.Type != watch.Added || !ok || got.Name != "in-the-gap" {
			t.Fatalf("first event = %s %v, want the ConfigMap created in the gap added",
				e.Type, e.Object)
		}
	case <-time.After(managertest.DefaultTimeout):
		t.Fatal("the ConfigMap created between LIST and WATCH never reached the watch")
	}
}
