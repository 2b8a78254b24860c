package handlers_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/internal/handlers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Handlers added through every way a typed view hands out an informer are
// recorded and removed; the shared informer, and a handler added to it
// directly, stay.
func TestRemoveAll(t *testing.T) {
	client := fake.NewClientset()
	f := kinformers.NewSharedInformerFactory(client, 0)
	hs := handlers.New()
	view := hs.Typed(f, "")
	var recorded, direct atomic.Int32
	count := func(n *atomic.Int32) cache.ResourceEventHandler {
		return cache.ResourceEventHandlerFuncs{AddFunc: func(any) { n.Add(1) }}
	}
	cms := view.Core().V1().ConfigMaps().Informer()
	if _, err := cms.AddEventHandler(count(&recorded)); err != nil {
		t.Fatal(err)
	}
	gi, err := view.ForResource(corev1.SchemeGroupVersion.WithResource("configmaps"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gi.Informer().AddEventHandlerWithResyncPeriod(count(&recorded), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Core().V1().ConfigMaps().Informer().AddEventHandler(count(&direct)); err != nil {
		t.Fatal(err)
	}
	if n := hs.Len(); n != 2 {
		t.Fatalf("recorded %d handlers, want 2", n)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	create := func(name string) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
		_, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true,
			func(context.Context) (bool, error) { return cond(), nil })
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	create("before")
	waitFor("both recorded handlers and the direct one see it", func() bool {
		return recorded.Load() == 2 && direct.Load() == 1
	})
	if err := hs.RemoveAll(); err != nil {
		t.Fatal(err)
	}
	if n := hs.Len(); n != 0 {
		t.Errorf("%d handlers recorded after RemoveAll", n)
	}
	create("after")
	waitFor("the direct handler sees it", func() bool { return direct.Load() == 2 })
	if n := recorded.Load(); n != 2 {
		t.Errorf("removed handlers saw %d events, want 2 (none after RemoveAll)", n)
	}
	if cms.IsStopped() {
		t.Error("RemoveAll stopped the shared informer")
	}
}
