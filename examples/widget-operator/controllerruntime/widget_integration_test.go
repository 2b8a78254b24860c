//go:build integration

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/ctrlhost/ctrlhost/examples/widget-operator/controllerruntime/api/v1alpha1"
)

// waitTimeout bounds every wait for the operator.
const waitTimeout = 30 * time.Second

// assetsDir is where envtest finds etcd and kube-apiserver: $KUBEBUILDER_ASSETS, or the
// binaries the repository builds from source. The test runs in this package's directory.
func assetsDir(t *testing.T) string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "_output", "testbin", "v1.37.1"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// startOperator starts an API server and the operator's manager on it, both stopped
// when t ends, and returns a client that reads straight from the API server.
func startOperator(t *testing.T) client.Client {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) })
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr)))

	env := &envtest.Environment{
		BinaryAssetsDirectory: assetsDir(t),
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd.yaml")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})

	scheme := newScheme(t)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		// Controller names are unique per process, and go test -count=N makes more
		// than one manager.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	if err := setupControllers(mgr); err != nil {
		t.Fatalf("set up controllers: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("manager: %v", err)
			}
		case <-time.After(waitTimeout):
			t.Errorf("manager did not stop within %s", waitTimeout)
		}
	})

	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	return c
}

// eventually polls check until it returns nil, failing t with check's last error
// after waitTimeout.
func eventually(t *testing.T, what string, check func(ctx context.Context) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, waitTimeout,
		true, func(ctx context.Context) (bool, error) {
			last = check(ctx)
			return last == nil, nil
		})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %v)", what, err, last)
	}
}

// configMapReady checks that the ConfigMap of widget key has secret-keys want and that
// the widget is Ready for its generation, counting n keys.
func configMapReady(c client.Client, key types.NamespacedName, want string,
	n int) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		var configMap corev1.ConfigMap
		if err := c.Get(ctx, key, &configMap); err != nil {
			return err
		}
		if got := configMap.Data[secretKeysKey]; got != want {
			return fmt.Errorf("secret-keys = %q, want %q", got, want)
		}
		var widget v1alpha1.Widget
		if err := c.Get(ctx, key, &widget); err != nil {
			return err
		}
		if widget.Status.SecretKeys != n {
			return fmt.Errorf("status.secretKeys = %d, want %d", widget.Status.SecretKeys, n)
		}
		ready := meta.FindStatusCondition(widget.Status.Conditions, conditionReady)
		if ready == nil || ready.Status != metav1.ConditionTrue ||
			ready.ObservedGeneration != widget.Generation {
			return fmt.Errorf("not ready for generation %d: %+v", widget.Generation, ready)
		}
		return nil
	}
}

func TestWidgetOperator(t *testing.T) {
	c := startOperator(t)
	ctx := context.Background()

	const ns = "widgets"
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := c.Create(ctx, namespace); err != nil {
		t.Fatal(err)
	}
	secret := func(name, widget string, keys ...string) *corev1.Secret {
		s := newSecret(name, widget, keys...)
		s.Namespace = ns
		return s
	}
	for _, obj := range []client.Object{
		&v1alpha1.Widget{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"},
			Spec:       v1alpha1.WidgetSpec{Data: map[string]string{"a": "1"}},
		},
		secret("s1", "w", "k1", "k2"),
		secret("s2", "w", "k2", "k3"),
		secret("s3", "", "k4"),
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	key := types.NamespacedName{Namespace: ns, Name: "w"}
	eventually(t, "configmap and Ready", configMapReady(c, key, "k1,k2,k3", 3))

	// Labelling s3 for the widget brings its key in.
	s3 := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "s3"}, s3); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(s3.DeepCopy())
	s3.Labels = map[string]string{widgetLabel: "w"}
	if err := c.Patch(ctx, s3, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, "s3's key", configMapReady(c, key, "k1,k2,k3,k4", 4))

	// Deleting the widget releases its Secrets, then lets it go.
	if err := c.Delete(ctx, &v1alpha1.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"},
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "widget gone", func(ctx context.Context) error {
		if err := c.Get(ctx, key, &v1alpha1.Widget{}); err != nil {
			return client.IgnoreNotFound(err)
		}
		return errors.New("widget still exists")
	})
	var secrets corev1.SecretList
	if err := c.List(ctx, &secrets, client.InNamespace(ns),
		client.HasLabels{widgetLabel}); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 0 {
		t.Fatalf("%d secrets still labelled after the widget went", len(secrets.Items))
	}

	// envtest runs no garbage collector: the ConfigMap stays, and only a real cluster's
	// GC would delete it by its ownerReference.
	var configMap corev1.ConfigMap
	if err := c.Get(ctx, key, &configMap); err != nil {
		t.Fatal(err)
	}
	if owner := metav1.GetControllerOf(&configMap); owner == nil || owner.Name != "w" {
		t.Fatalf("configmap controller = %+v, want Widget w", owner)
	}
}
