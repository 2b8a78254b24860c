//go:build integration

package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
)

var gizmos = schema.GroupVersionResource{
	Group: "served.ctrlhost.io", Version: "v1", Resource: "gizmos",
}

const gizmoCRDName = "gizmos.served.ctrlhost.io"

func gizmoCRD() map[string]any {
	return map[string]any{
		"metadata": map[string]any{"name": gizmoCRDName},
		"spec": map[string]any{
			"group": gizmos.Group,
			"scope": "Namespaced",
			"names": map[string]any{
				"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "listKind": "GizmoList",
			},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}
}

// gizmoMirror writes a ConfigMap "gizmo-<name>" for every Gizmo it sees,
// and records the informers its starts made.
type gizmoMirror struct {
	mu        sync.Mutex
	informers []cache.SharedIndexInformer
}

func (g *gizmoMirror) descriptor() descriptor.Descriptor {
	init := func(ctx context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		client, err := cc.ClientBuilder.Client("gizmo-mirror")
		if err != nil {
			return nil, err
		}
		inf := cc.DynamicInformerFactory.ForResource(gizmos).Informer()
		g.mu.Lock()
		g.informers = append(g.informers, inf)
		g.mu.Unlock()
		added := make(chan *unstructured.Unstructured, 100)
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			added <- obj.(*unstructured.Unstructured)
		}}); err != nil {
			return nil, err
		}
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			for {
				select {
				case <-ctx.Done():
					return nil
				case u := <-added:
					cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
						Name: "gizmo-" + u.GetName(), Namespace: u.GetNamespace()}}
					cms := client.CoreV1().ConfigMaps(u.GetNamespace())
					_, err := cms.Create(ctx, cm, metav1.CreateOptions{})
					if err != nil && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil {
						return err
					}
				}
			}
		}), nil
	}
	return descriptor.New("gizmo-mirror", init).WhenServed(gizmos)
}

func (g *gizmoMirror) informer(i int) cache.SharedIndexInformer {
	g.mu.Lock()
	defer g.mu.Unlock()
	if i >= len(g.informers) {
		return nil
	}
	return g.informers[i]
}

// A WhenServed controller on a real API server: it waits while its CRD is
// not installed, acts once it is, stops with its informer when the CRD is
// deleted, and acts again when it is installed again.
func TestWhenServedFollowsTheCRD(t *testing.T) {
	env := sharedEnv(t)
	cs := clientset(t, env.Config())
	dyn, err := dynamic.NewForConfig(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	ns := namespace(t, cs)
	g := &gizmoMirror{}
	m, err := manager.NewBuilder("served-it").WithRESTConfig(env.Config()).
		Register(g.descriptor()).Build()
	if err != nil {
		t.Fatal(err)
	}
	runManager(t, m)
	t.Cleanup(func() { _ = env.UninstallCRDs(context.WithoutCancel(t.Context()), gizmoCRDName) })

	phase := func(want manager.Phase) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) {
			st, _ := m.Status("gizmo-mirror")
			return st.Phase == want, nil
		}
	}
	mirrored := func(name string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "gizmo-"+name, metav1.GetOptions{})
			return err == nil, nil
		}
	}
	createGizmo := func(name string) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("served.ctrlhost.io/v1")
		u.SetKind("Gizmo")
		u.SetName(name)
		_, err := dyn.Resource(gizmos).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating gizmo %s: %v", name, err)
		}
	}

	eventually(t, "the controller waits for its CRD", phase(manager.PhaseUnserved))
	for round, name := range []string{"first", "second"} {
		if err := env.InstallCRDs(t.Context(), gizmoCRD()); err != nil {
			t.Fatal(err)
		}
		established := time.Now()
		createGizmo(name)
		eventually(t, "the controller mirrors gizmo "+name, mirrored(name))
		t.Logf("round %d: from the CRD established (and discoverable) "+
			"to the controller's first write: %v",
			round+1, time.Since(established).Round(time.Millisecond))

		if err := env.UninstallCRDs(t.Context(), gizmoCRDName); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the controller stops with its CRD", phase(manager.PhaseUnserved))
		eventually(t, "its informer stops", func(context.Context) (bool, error) {
			inf := g.informer(round)
			return inf != nil && inf.IsStopped(), nil
		})
	}
	if st, _ := m.Status("gizmo-mirror"); st.Starts != 2 {
		t.Errorf("Starts = %d, want 2", st.Starts)
	}
}
