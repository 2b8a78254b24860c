//go:build integration

package testenv

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
)

const widgetCRD = `# A namespaced CRD with a status subresource.
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties: {size: {type: integer}}
          status:
            type: object
            properties: {ready: {type: boolean}}
---
`

// TestCRDLifecycle installs a CRD through Options.CRDPaths, installs it
// again (an update), uses a custom resource and its status subresource
// with the dynamic client, and uninstalls the CRD.
func TestCRDLifecycle(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	file := filepath.Join(dir, "widgets.yaml")
	writeFile(t, file, widgetCRD)

	begin := time.Now()
	e, err := Start(ctx, Options{Logf: t.Logf, CRDPaths: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("Start with CRDPaths took %v", time.Since(begin).Round(time.Millisecond))
	begin = time.Now()
	if err := e.InstallCRDFiles(ctx, file); err != nil {
		t.Fatalf("installing the CRD a second time: %v", err)
	}
	t.Logf("InstallCRDFiles of an installed CRD took %v",
		time.Since(begin).Round(time.Millisecond))

	disco, err := discovery.NewDiscoveryClientForConfig(e.Config())
	if err != nil {
		t.Fatal(err)
	}
	// Served as soon as the install returns: no polling here.
	if !servesResource(t, disco, "example.com/v1", "widgets") {
		t.Fatal("example.com/v1 widgets not in discovery after the install returned")
	}

	dyn, err := dynamic.NewForConfig(e.Config())
	if err != nil {
		t.Fatal(err)
	}
	widgets := dyn.Resource(schema.GroupVersionResource{
		Group: "example.com", Version: "v1", Resource: "widgets",
	}).Namespace("default")
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": "w1"},
		"spec":       map[string]any{"size": int64(3)},
		"status":     map[string]any{"ready": true}, // dropped: status is a subresource
	}}
	w, err = widgets.Create(ctx, w, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a Widget: %v", err)
	}
	if _, ok := w.Object["status"]; ok {
		t.Errorf("status set by create, though the CRD has a status subresource: %v", w.Object)
	}
	if err := unstructured.SetNestedField(w.Object, true, "status", "ready"); err != nil {
		t.Fatal(err)
	}
	if _, err := widgets.UpdateStatus(ctx, w, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("updating the status: %v", err)
	}
	got, err := widgets.Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready, _, _ := unstructured.NestedBool(got.Object, "status", "ready")
	size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size")
	if !ready || size != 3 {
		t.Errorf("after UpdateStatus: status.ready=%t spec.size=%d, want true and 3", ready, size)
	}

	// A CRD whose singular name is taken is never established; the error
	// says so and why.
	gizmos := crdMap("gizmos", "example.com")
	gizmos["spec"].(map[string]any)["names"].(map[string]any)["singular"] = "widget"
	shortCtx, cancel := context.WithTimeout(ctx, time.Second)
	err = e.InstallCRDs(shortCtx, gizmos)
	cancel()
	t.Logf("installing a CRD with a taken name: %v", err)
	for _, want := range []string{`CRD "gizmos.example.com": not Established after 1`,
		"condition NamesAccepted=False (reason SingularConflict: "} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("installing a CRD with a taken name: error %v, want it to mention %q",
				err, want)
		}
	}

	begin = time.Now()
	if err := e.UninstallCRDs(ctx, "widgets.example.com", "gizmos.example.com"); err != nil {
		t.Fatal(err)
	}
	t.Logf("UninstallCRDs took %v", time.Since(begin).Round(time.Millisecond))
	if servesResource(t, disco, "example.com/v1", "widgets") {
		t.Error("example.com/v1 widgets still in discovery after the uninstall returned")
	}
	if _, err := widgets.Get(ctx, "w1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("getting the Widget after the uninstall: %v, want NotFound", err)
	}
	// Uninstalling what is gone is no error.
	if err := e.UninstallCRDs(ctx, "widgets.example.com"); err != nil {
		t.Errorf("uninstalling again: %v", err)
	}
}

// servesResource reports whether discovery of groupVersion lists resource.
func servesResource(t *testing.T, disco discovery.DiscoveryInterface,
	groupVersion, resource string,
) bool {
	t.Helper()
	list, err := disco.ServerResourcesForGroupVersion(groupVersion)
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatalf("discovery of %s: %v", groupVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Name == resource {
			return true
		}
	}
	return false
}
