package main

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func ns(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func source(to string, data string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "src",
			Name:      "settings",
			Labels:    map[string]string{toLabel: to},
		},
		Data: map[string]string{"k": data},
	}
}

func startOperator(t *testing.T, objs ...runtime.Object) *managertest.Harness {
	t.Helper()
	h := managertest.New(
		t,
		"ctrlhost-operator",
		descriptors(),
		append([]runtime.Object{ns("src"), ns("dst"), ns("other")}, objs...)...)
	return h
}

// waitWatching waits until the mirror watches ConfigMaps: a write before
// that, between its informer's LIST and WATCH, the fake clientset never
// delivers (a test that updated at once failed under load).
func waitWatching(t *testing.T, h *managertest.Harness) {
	t.Helper()
	h.WaitRunning("configmap-mirror")
	managertest.Eventually(t, "the mirror watches ConfigMaps",
		func() bool { return h.Watches("configmaps") > 0 })
}

func copyIn(t *testing.T, h *managertest.Harness, namespace string) (*corev1.ConfigMap, bool) {
	t.Helper()
	cm, err := h.Client.CoreV1().
		ConfigMaps(namespace).
		Get(context.Background(), "settings", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("get copy: %v", err)
	}
	return cm, true
}

func TestMirrorLifecycle(t *testing.T) {
	h := startOperator(t, source("dst", "v1")).Start()
	waitWatching(t, h)
	ctx := context.Background()
	cms := h.Client.CoreV1().ConfigMaps("src")

	managertest.Eventually(t, "the copy is created", func() bool {
		cm, ok := copyIn(t, h, "dst")
		return ok && cm.Data["k"] == "v1" && cm.Annotations[fromAnnote] == "src/settings" &&
			cm.Labels[fromNSLbl] == "src" && cm.Labels[fromName] == "settings"
	})

	if _, err := cms.Update(ctx, source("dst", "v2"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "the copy follows an update", func() bool {
		cm, ok := copyIn(t, h, "dst")
		return ok && cm.Data["k"] == "v2"
	})

	if _, err := cms.Update(ctx, source("other", "v2"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "the copy moves to the new target", func() bool {
		_, inDst := copyIn(t, h, "dst")
		_, inOther := copyIn(t, h, "other")
		return !inDst && inOther
	})

	if err := cms.Delete(ctx, "settings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "the copy is deleted with its source", func() bool {
		_, ok := copyIn(t, h, "other")
		return !ok
	})
	if err := h.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

func TestMirrorLeavesForeignConfigMapAlone(t *testing.T) {
	foreign := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "dst", Name: "settings"},
		Data:       map[string]string{"k": "mine"},
	}
	h := startOperator(t, source("dst", "v1"), foreign).Start()
	waitWatching(t, h)
	// The mirror's sync runs once the caches have synced; a later source
	// (in another namespace) being mirrored proves the first was handled.
	marker := source("other", "x")
	marker.Name = "marker"
	if _, err := h.Client.CoreV1().ConfigMaps("src").Create(context.Background(), marker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "the marker is mirrored", func() bool {
		_, err := h.Client.CoreV1().
			ConfigMaps("other").
			Get(context.Background(), "marker", metav1.GetOptions{})
		return err == nil
	})
	cm, ok := copyIn(t, h, "dst")
	if !ok || cm.Data["k"] != "mine" || cm.Annotations[fromAnnote] != "" {
		t.Errorf("foreign ConfigMap changed: %+v", cm)
	}
}

// TestPanicInMirrorIsRecoveredAndCounted makes the first create panic (in a
// reactor, inside the sync) and checks the Manager keeps running, the key
// is retried, and /metrics shows the panic.
func TestPanicInMirrorIsRecoveredAndCounted(t *testing.T) {
	// The kit's counters are the Manager's own (workloop.Options.Metrics):
	// a new Manager starts from zero, whatever ran before in the process.
	h := startOperator(t, source("dst", "v1"))
	var panicked atomic.Bool
	h.Client.PrependReactor(
		"create",
		"configmaps",
		func(k8stesting.Action) (bool, runtime.Object, error) {
			if panicked.CompareAndSwap(false, true) {
				panic("reactor panic")
			}
			return false, nil, nil
		},
	)
	h.Start()
	waitWatching(t, h)
	managertest.Eventually(t, "the copy is created on retry", func() bool {
		_, ok := copyIn(t, h, "dst")
		return ok
	})
	if !panicked.Load() {
		t.Fatal("the reactor never panicked")
	}
	_, body := h.Get("/metrics")
	want := `workloop_sync_panics_total{controller="configmap-mirror"} 1`
	if !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %q:\n%s", want, grepLines(body, "workloop_"))
	}
	if st, _ := h.Manager.Status("configmap-mirror"); st.Err != nil {
		t.Errorf("controller status err = %v", st.Err)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestSecretCounterAndHealth(t *testing.T) {
	var counter atomic.Pointer[secretCounter]
	h := startOperator(t)
	ds := descriptors()
	ds[1] = descriptor.New(
		"secret-counter",
		func(ctx context.Context, cc descriptor.Context) (descriptor.Controller, error) {
			c, err := newSecretCounter(ctx, cc)
			if err == nil {
				counter.Store(c.(*secretCounter))
			}
			return c, err
		},
	)
	h.Builder = manager.NewBuilder("ctrlhost-operator").
		Register(ds...).
		WithClient(h.Client, h.Metadata)
	// managertest's metadata client reads the typed fake's store.
	for _, name := range []string{"a", "b"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "src", Name: name}}
		if _, err := h.Client.CoreV1().Secrets("src").Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.Start()
	h.WaitRunning("secret-counter", "serviceaccount-controller", "configmap-mirror")
	h.WaitHealthy("/readyz")
	if _, body := h.Get("/readyz?verbose"); !strings.Contains(body, "secret-counter") {
		t.Errorf("/readyz does not list secret-counter:\n%s", body)
	}
	managertest.Eventually(t, "two secrets are counted", func() bool {
		c := counter.Load()
		return c != nil && c.Count() == 2
	})
}

// TestMirrorSize keeps the mirror within 1.3x the lines of its
// controller-runtime equivalent, the promise of the package doc.
func TestMirrorSize(t *testing.T) {
	lines := func(path string) int {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), "\n")
	}
	ours, theirs := lines("mirror.go"), lines("mirror_controllerruntime.go.txt")
	if float64(ours) > 1.3*float64(theirs) {
		t.Errorf(
			"mirror.go has %d lines, more than 1.3x the controller-runtime mirror's %d",
			ours,
			theirs,
		)
	}
}
