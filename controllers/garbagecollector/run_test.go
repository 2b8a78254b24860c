package garbagecollector

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/tools/record"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/informers"
	"github.com/ctrlhost/ctrlhost/managertest"
)

// stubDiscovery answers ServerPreferredResources with lists (client-go's
// fake discovery answers nothing), and err beside them.
type stubDiscovery struct {
	fakediscovery.FakeDiscovery
	lists []*metav1.APIResourceList
	err   error
}

func (s *stubDiscovery) ServerPreferredResources() ([]*metav1.APIResourceList, error) {
	return s.lists, s.err
}

var _ discovery.ServerResourcesInterface = (*stubDiscovery)(nil)

func coreResources(names ...string) []*metav1.APIResourceList {
	l := &metav1.APIResourceList{GroupVersion: "v1"}
	for _, n := range names {
		l.APIResources = append(l.APIResources, metav1.APIResource{
			Name: n, Namespaced: n != "nodes", Verbs: []string{"get", "list", "watch", "delete"},
		})
	}
	return []*metav1.APIResourceList{l}
}

func typedCM(name string, refs ...metav1.OwnerReference) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       "ns",
			Name:            name,
			UID:             typesUID(name),
			OwnerReferences: refs,
		},
	}
}

func typesUID(name string) types.UID { return types.UID("uid-" + name) }

// TestRunCollectsGarbage runs the collector over fake clients: it watches
// the discovered resources less the ignored ones, deletes an object whose
// owner never existed, and, when an owner is deleted later, its
// dependent; the debugging handler shows the graph.
func TestRunCollectsGarbage(t *testing.T) {
	h := managertest.New(t, "gc", nil,
		typedCM("orphaned", owner("ghost", "uid-ghost", false)),
		typedCM("root"), typedCM("child", owner("root", "uid-root", true)), typedCM("keep"))
	set := informers.New(h.Client, h.Metadata, informers.Options{})
	started := make(chan struct{})
	close(started)
	mapper := newTestMapper()
	gc := newCollector("test", deps{
		metadata: h.Metadata, discovery: &stubDiscovery{lists: coreResources("configmaps", "events")}, mapper: mapper,
		factory: set, informersStarted: started, recorder: record.NewFakeRecorder(10),
		ignored: defaultIgnoredResources(), workers: 2, syncPeriod: time.Second,
	})
	ctx, cancel := context.WithCancel(controllertest.LogContext(t))
	done := make(chan error, 1)
	go func() { done <- gc.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		set.Shutdown()
	}()

	gone := func(name string) func() bool {
		return func() bool {
			_, err := h.Client.CoreV1().ConfigMaps("ns").Get(t.Context(), name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}
	}
	controllertest.WaitFor(t, "the object with an absent owner to be deleted", gone("orphaned"))
	gc.monMu.Lock()
	var watched []schema.GroupVersionResource
	for r := range gc.monitors {
		watched = append(watched, r)
	}
	gc.monMu.Unlock()
	if !slices.Equal(watched, []schema.GroupVersionResource{configMaps}) {
		t.Errorf("watched %v, want configmaps only (events are ignored)", watched)
	}
	if mapper.resets == 0 {
		t.Error("RESTMapper not reset when the resources changed")
	}

	rec := httptest.NewRecorder()
	gc.DebuggingHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/graph", nil))
	if body := rec.Body.String(); rec.Code != http.StatusOK ||
		!strings.Contains(body, `"uid-child" -> "uid-root";`) {
		t.Errorf("/graph: %d\n%s", rec.Code, body)
	}

	if err := h.Client.CoreV1().ConfigMaps("ns").Delete(t.Context(), "root", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(t, "the deleted owner's dependent to be deleted", gone("child"))
	if gone("keep")() {
		t.Error("an object without owners was deleted")
	}
}

// TestRefreshFollowsDiscovery: a resource that appears is watched, one
// that disappears is dropped; a partial discovery failure keeps the synced
// monitors of the groups that failed.
func TestRefreshFollowsDiscovery(t *testing.T) {
	h := managertest.New(t, "gc", nil)
	set := informers.New(h.Client, h.Metadata, informers.Options{})
	started := make(chan struct{})
	close(started)
	disc := &stubDiscovery{lists: coreResources("configmaps")}
	gc := newCollector("test", deps{
		metadata: h.Metadata, discovery: disc, mapper: newTestMapper(), factory: set,
		informersStarted: started, recorder: record.NewFakeRecorder(10), workers: 1, syncPeriod: 5 * time.Second,
	})
	defer gc.toDelete.ShutDown()
	defer gc.toOrphan.ShutDown()
	defer gc.changes.ShutDown()
	ctx, cancel := context.WithCancel(controllertest.LogContext(t))
	defer set.Shutdown()
	defer cancel()

	watched := func() []string {
		gc.monMu.Lock()
		defer gc.monMu.Unlock()
		var out []string
		for r := range gc.monitors {
			out = append(out, r.Resource)
		}
		slices.Sort(out)
		return out
	}
	res := gc.refresh(ctx, nil)
	if got := watched(); !slices.Equal(got, []string{"configmaps"}) {
		t.Fatalf("watched %v", got)
	}
	disc.lists = coreResources("secrets", "nodes")
	res = gc.refresh(ctx, res)
	if got := watched(); !slices.Equal(got, []string{"nodes", "secrets"}) {
		t.Fatalf("after a change, watched %v, want nodes and secrets", got)
	}
	disc.lists = coreResources("secrets")
	disc.err = &discovery.ErrGroupDiscoveryFailed{
		Groups: map[schema.GroupVersion]error{{Version: "v1"}: context.DeadlineExceeded},
	}
	gc.refresh(ctx, res)
	if got := watched(); !slices.Equal(got, []string{"nodes", "secrets"}) {
		t.Errorf("after a partial failure, watched %v, want the synced nodes monitor kept", got)
	}
}
