//go:build integration

package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/ctrlhost/ctrlhost/controllers/garbagecollector"
	"github.com/ctrlhost/ctrlhost/examples/widget-operator/api/v1alpha1"
	testpoll "github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/serving"
	"github.com/ctrlhost/ctrlhost/testenv"
)

// operatorUser is the ServiceAccount config/rbac.yaml binds, as the API
// server names it.
const operatorUser = "system:serviceaccount:widget-system:widget-operator"

// The operator runs on a real API server as the user config/rbac.yaml
// grants, with the CRD of config/crd.yaml, beside the built-in garbage
// collector (as a cluster's kube-controller-manager runs it): it becomes
// ready, keeps a Widget's ConfigMap and status, and on deletion releases
// the Widget's Secrets, after which the garbage collector deletes the
// ConfigMap the Widget owned.
func TestOperatorRunsWithItsRBAC(t *testing.T) {
	ctx := t.Context()
	env, err := testenv.Start(ctx, testenv.Options{Users: []testenv.User{{Name: operatorUser}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	}()
	if err := env.InstallCRDFiles(ctx, "config/crd.yaml"); err != nil {
		t.Fatal(err)
	}
	admin := kubernetes.NewForConfigOrDie(env.Config())
	dyn := dynamic.NewForConfigOrDie(env.Config())
	for _, ns := range []string{"widget-system", "app"} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	applyManifest(t, env.Config(), "config/rbac.yaml")

	userCfg, err := env.UserConfig(operatorUser)
	if err != nil {
		t.Fatal(err)
	}
	opts := manager.NewOperatorOptions()
	opts.LeaderElection.Namespace = "widget-system"
	opts.Serving.SecurePort = serving.PortEphemeral
	operator := runManager(t, manager.NewBuilder("widget-operator").WithOptions(opts).
		WithRESTConfig(userCfg).Register(descriptors()...))
	runManager(t, manager.NewBuilder("kcm").WithRESTConfig(env.Config()).
		Register(garbagecollector.Descriptor(garbagecollector.NewOptions())))
	waits.UntilContext(t, "the operator ready", func(ctx context.Context) (bool, error) {
		return readyz(ctx, operator.ServingAddr().String()) == nil, nil
	})

	widgets := dyn.Resource(v1alpha1.Resource).Namespace("app")
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": "Widget",
		"metadata": map[string]any{"name": "w"},
		"spec":     map[string]any{"data": map[string]any{"a": "1"}},
	}}
	if _, err := widgets.Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*corev1.Secret{newSecret("s1", "w", "k1"), newSecret("s2", "w", "k2")} {
		s.Namespace = "app"
		if _, err := admin.CoreV1().Secrets("app").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cms := admin.CoreV1().ConfigMaps("app")
	configured := "the ConfigMap and a Ready status"
	waits.UntilContext(t, configured, func(ctx context.Context) (bool, error) {
		cm, err := cms.Get(ctx, "w", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		u, err := widgets.Get(ctx, "w", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got := &v1alpha1.Widget{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, got); err != nil {
			return false, err
		}
		ready := meta.FindStatusCondition(got.Status.Conditions, "Ready")
		return cm.Data["a"] == "1" && cm.Data[secretKeys] == "k1,k2" && got.Status.SecretKeys == 2 &&
			ready != nil &&
			ready.Status == metav1.ConditionTrue, nil
	})

	if err := widgets.Delete(ctx, "w", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone := "the Widget, its ConfigMap and the Secrets' labels gone"
	waits.UntilContext(t, gone, func(ctx context.Context) (bool, error) {
		if _, err := widgets.Get(ctx, "w", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, nil
		}
		if _, err := cms.Get(ctx, "w", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, nil // the garbage collector has not deleted it yet
		}
		secrets, err := admin.CoreV1().
			Secrets("app").
			List(ctx, metav1.ListOptions{LabelSelector: widgetLabel})
		return err == nil && len(secrets.Items) == 0, err
	})
}

// runManager builds and runs a Manager until the test ends.
func runManager(t *testing.T, b *manager.Builder) *manager.Manager {
	t.Helper()
	m, err := b.WithLogger(testr.New(t)).Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: %v", m.Component(), err)
		}
	})
	waits.UntilContext(t, m.Component()+" serving", func(context.Context) (bool, error) {
		return !m.Options().Serving.Enabled() || m.ServingAddr() != nil, nil
	})
	return m
}

// applyManifest creates every object of a multi-document YAML file.
func applyManifest(t *testing.T, cfg *rest.Config, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(
		memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cfg)))
	dyn := dynamic.NewForConfigOrDie(cfg)
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		m, err := mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
		if err != nil {
			t.Fatalf("%s: %s: %v", path, u.GetKind(), err)
		}
		var res dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			res = dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		if _, err := res.Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: %s %s: %v", path, u.GetKind(), u.GetName(), err)
		}
	}
}

func readyz(ctx context.Context, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/readyz", nil)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, // self-signed serving certificate
	}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("readyz: %d %s", resp.StatusCode, body)
	}
	return nil
}

// waits bounds each wait of these tests to a minute.
var waits = testpoll.Within(time.Minute)
