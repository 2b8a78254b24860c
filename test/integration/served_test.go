//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/testenv"
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

// gizmoRig is a Manager running the gizmo mirror on the shared testenv,
// with what a test needs to drive the CRD and watch the controller.
type gizmoRig struct {
	tb  testing.TB
	env *testenv.Env
	cs  kubernetes.Interface
	dyn dynamic.Interface
	ns  string
	g   *gizmoMirror
	m   *manager.Manager
}

func newGizmoRig(tb testing.TB) *gizmoRig {
	env := sharedEnv(tb)
	r := &gizmoRig{tb: tb, env: env, cs: clientset(tb, env.Config()), g: &gizmoMirror{}}
	var err error
	if r.dyn, err = dynamic.NewForConfig(env.Config()); err != nil {
		tb.Fatal(err)
	}
	r.ns = namespace(tb, r.cs)
	r.m, err = manager.NewBuilder("served-it").WithRESTConfig(env.Config()).
		Register(r.g.descriptor()).Build()
	if err != nil {
		tb.Fatal(err)
	}
	runManager(tb, r.m)
	tb.Cleanup(func() { _ = env.UninstallCRDs(context.WithoutCancel(tb.Context()), gizmoCRDName) })
	return r
}

func (r *gizmoRig) phase(want manager.Phase) func(context.Context) (bool, error) {
	return func(context.Context) (bool, error) {
		st, _ := r.m.Status("gizmo-mirror")
		return st.Phase == want, nil
	}
}

func (r *gizmoRig) mirrored(name string) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		_, err := r.cs.CoreV1().ConfigMaps(r.ns).Get(ctx, "gizmo-"+name, metav1.GetOptions{})
		return err == nil, nil
	}
}

// install installs the CRD, creates a gizmo named name at once, waits
// until the controller mirrored it, and returns the time from InstallCRDs
// returning (the CRD established and discoverable) to the mirror.
func (r *gizmoRig) install(name string) time.Duration {
	if err := r.env.InstallCRDs(r.tb.Context(), gizmoCRD()); err != nil {
		r.tb.Fatal(err)
	}
	established := time.Now()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("served.ctrlhost.io/v1")
	u.SetKind("Gizmo")
	u.SetName(name)
	gz := r.dyn.Resource(gizmos).Namespace(r.ns)
	if _, err := gz.Create(r.tb.Context(), u, metav1.CreateOptions{}); err != nil {
		r.tb.Fatalf("creating gizmo %s: %v", name, err)
	}
	poll.UntilContext(r.tb, "the controller mirrors gizmo "+name, r.mirrored(name))
	return time.Since(established)
}

// uninstall deletes the CRD and waits until the controller stopped and
// its informer of start round (from 0) with it.
func (r *gizmoRig) uninstall(round int) {
	if err := r.env.UninstallCRDs(r.tb.Context(), gizmoCRDName); err != nil {
		r.tb.Fatal(err)
	}
	poll.UntilContext(r.tb, "the controller stops with its CRD", r.phase(manager.PhaseUnserved))
	if inf := r.g.informer(round); inf == nil || !inf.IsStopped() {
		r.tb.Fatalf("round %d: the controller is unserved, but its informer runs", round+1)
	}
}

// A WhenServed controller on a real API server: it waits while its CRD is
// not installed, acts once it is, stops with its informer when the CRD is
// deleted, and acts again when it is installed again.
func TestWhenServedFollowsTheCRD(t *testing.T) {
	r := newGizmoRig(t)
	poll.UntilContext(t, "the controller waits for its CRD", r.phase(manager.PhaseUnserved))
	for round, name := range []string{"first", "second"} {
		took := r.install(name)
		t.Logf("round %d: from the CRD established (and discoverable) "+
			"to the controller's first write: %v", round+1, took.Round(time.Millisecond))
		r.uninstall(round)
	}
	if st, _ := r.m.Status("gizmo-mirror"); st.Starts != 2 {
		t.Errorf("Starts = %d, want 2", st.Starts)
	}
}

// BenchmarkWhenServedStart measures, over $BENCH_ROUNDS rounds (default
// 3), the time from a CRD established and discoverable (InstallCRDs
// returned) to the first write of the WhenServed controller that waits for
// it, on a gizmo created at that moment: the host's discovery (a poll, or
// the CRD watch) and the controller's fresh informer's first event. It
// reports the median.
func BenchmarkWhenServedStart(b *testing.B) {
	rounds := 3
	if s := os.Getenv("BENCH_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("BENCH_ROUNDS=%q: want a positive integer", s)
		}
		rounds = n
	}
	for range b.N {
		r := newGizmoRig(b)
		poll.UntilContext(b, "the controller waits for its CRD", r.phase(manager.PhaseUnserved))
		var took []time.Duration
		for round := range rounds {
			took = append(took, r.install(fmt.Sprintf("bench-%d", round)))
			r.uninstall(round)
		}
		slices.Sort(took)
		b.Logf("established → first write, %d rounds: %v", rounds, took)
		b.ReportMetric(took[len(took)/2].Seconds(), "established-to-acts-s")
	}
}
