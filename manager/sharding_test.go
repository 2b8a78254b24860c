package manager_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/informers"
	"github.com/ctrlhost/ctrlhost/leader/leadertest"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
	"github.com/ctrlhost/ctrlhost/shard"
)

// keyWork records, per key (a namespace), which replica works it and
// when, and every moment two replicas worked one key at once.
type keyWork struct {
	mu       sync.Mutex
	working  map[string]string // namespace → replica
	overlaps []string
	cached   map[string][]string // replica → namespaces its slot terms cache now
	// unsharded: the host does not shard (Context.Shard must be nil).
	unsharded bool
}

func newKeyWork() *keyWork {
	return &keyWork{working: map[string]string{}, cached: map[string][]string{}}
}

// descriptor is a sharded controller that, once its slot's pods are
// synced, works every namespace it caches until its term ends.
func (w *keyWork) descriptor(replica string) descriptor.Descriptor {
	return descriptor.New("pod-sharder", func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		pods := cc.InformerFactory.Core().V1().Pods()
		informer := pods.Informer()
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			<-cc.InformersStarted
			if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
				return nil
			}
			list, err := pods.Lister().List(labels.Everything())
			if err != nil {
				return err
			}
			var mine []string
			for _, p := range list {
				mine = append(mine, p.Namespace)
				if w.unsharded != (cc.Shard == nil) || (cc.Shard != nil && !slices.Contains(cc.Shard.Slots, cc.Shard.Space.SlotOfKey(p.Namespace))) {
					w.mu.Lock()
					w.overlaps = append(w.overlaps, fmt.Sprintf("%s cached a pod of %s outside its scope %+v", replica, p.Namespace, cc.Shard))
					w.mu.Unlock()
				}
			}
			slices.Sort(mine)
			mine = slices.Compact(mine)
			w.mu.Lock()
			for _, ns := range mine {
				if other, ok := w.working[ns]; ok {
					w.overlaps = append(w.overlaps, fmt.Sprintf("%s started working %s while %s worked it", replica, ns, other))
				}
				w.working[ns] = replica
			}
			w.cached[replica] = append(w.cached[replica], mine...)
			w.mu.Unlock()
			<-ctx.Done()
			w.mu.Lock()
			for _, ns := range mine {
				if w.working[ns] == replica {
					delete(w.working, ns)
				}
				w.cached[replica] = slices.DeleteFunc(w.cached[replica], func(s string) bool { return s == ns })
			}
			w.mu.Unlock()
			return nil
		}), nil
	}).Sharded(shard.ByNamespace)
}

// spread returns how many keys each replica works, and how many are
// worked in all.
func (w *keyWork) spread() (map[string]int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for _, r := range w.working {
		out[r]++
	}
	return out, len(w.working)
}

// namespaceName spreads names over the hash space, as generated names do
// (sequential names cluster: see package shard).
func namespaceName(i int) string {
	h := fnv.New32a()
	fmt.Fprint(h, i)
	return fmt.Sprintf("ns-%08x", h.Sum32())
}

// TestShardedControllerSharesItsWork: three replicas share a sharded
// controller's slots two each while one of them runs the unsharded one;
// each replica caches only its slots' pods; status, readiness and metrics
// say which slots it holds; a replica leaving hands its slots to the
// others, one joining takes its share, and no namespace is ever worked by
// two replicas at once.
func TestShardedControllerSharesItsWork(t *testing.T) {
	const namespaces, slots = 60, 6
	var objects []runtime.Object
	for i := range namespaces {
		objects = append(objects, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: namespaceName(i)}})
	}
	space := shard.Space{Slots: slots}
	w := newKeyWork()
	act := &activity{active: map[string]int{}}
	var hs []*managertest.Harness
	start := func(replica string) *managertest.Harness {
		h := managertest.New(t, "sharded-manager", []descriptor.Descriptor{
			w.descriptor(replica),
			act.controller("elected-controller", replica),
		}, objects...)
		if len(hs) == 0 {
			leadertest.EnforceResourceVersion(h.Client)
		} else {
			h.Share(hs[0])
		}
		h.Options = fastElection(replica)
		h.Options.Sharding = shard.Options{Enabled: true, Slots: slots}
		hs = append(hs, h.Start())
		return h
	}
	// balanced waits until every namespace is worked, by exactly the
	// given replicas.
	balanced := func(what string, replicas ...string) {
		t.Helper()
		managertest.Eventually(t, what, func() bool {
			got, n := w.spread()
			return n == namespaces && slices.Equal(slices.Sorted(maps.Keys(got)), replicas)
		})
	}
	a, b, c := start("a"), start("b"), start("c")
	balanced("three replicas share every namespace", "a", "b", "c")
	managertest.Eventually(t, "one leader", func() bool { return len(act.leaders()) == 1 })
	// Every namespace worked does not yet mean two slots each: a replica
	// may hold a third until the one that lacks it takes it over.
	managertest.Eventually(t, "two slots each", func() bool {
		for _, h := range []*managertest.Harness{a, b, c} {
			if st, _ := h.Manager.Status("pod-sharder"); len(st.Slots) != 2 {
				return false
			}
		}
		return true
	})

	for _, h := range []*managertest.Harness{a, b, c} {
		_, self := h.Manager.Leader()
		st := h.WaitFor("pod-sharder", manager.PhaseRunning)
		if len(st.Slots) != 2 {
			t.Errorf("%s: Status.Slots = %v, want two of %d slots", self, st.Slots, slots)
		}
		// Its cache holds its slots' namespaces and nothing else.
		w.mu.Lock()
		cached := slices.Clone(w.cached[self])
		w.mu.Unlock()
		for _, ns := range cached {
			if !slices.Contains(st.Slots, space.SlotOfKey(ns)) {
				t.Errorf("%s caches a pod of %s (slot %d) but holds slots %v", self, ns, space.SlotOfKey(ns), st.Slots)
			}
		}
		h.WaitHealthy("/readyz")
		_, body := h.Get("/readyz?verbose")
		for _, want := range []string{
			fmt.Sprintf("[+]sharding ok: [group sharded-manager-shard: slots %v of %d]", st.Slots, slots),
			fmt.Sprintf("[+]pod-sharder ok: slots %v", st.Slots),
		} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: /readyz?verbose lacks %q:\n%s", self, want, body)
			}
		}
		_, metrics := h.Get("/metrics")
		for _, slot := range st.Slots {
			if want := fmt.Sprintf(`sharded_manager_shard_slot_held{group="sharded-manager-shard",slot="%d"} 1`, slot); !strings.Contains(metrics, want) {
				t.Errorf("%s: /metrics lacks %s", self, want)
			}
		}
		if want := `sharded_manager_controller_running{controller="pod-sharder"} 2`; !strings.Contains(metrics, want) {
			t.Errorf("%s: /metrics lacks %s", self, want)
		}
	}

	left := time.Now()
	if err := b.Stop(); err != nil {
		t.Fatalf("b: Run: %v", err)
	}
	balanced("b left", "a", "c")
	t.Logf("b's slots worked elsewhere %v after its Stop", time.Since(left).Round(time.Millisecond))
	if st, _ := a.Manager.Status("pod-sharder"); len(st.Slots) != 3 {
		t.Errorf("a: Status.Slots = %v after b left, want three", st.Slots)
	}
	start("d")
	balanced("d joined", "a", "c", "d")

	for _, h := range hs {
		if err := h.Stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.overlaps) > 0 {
		t.Errorf("namespaces worked by two replicas at once:\n%s", strings.Join(w.overlaps, "\n"))
	}
	if len(w.working) != 0 {
		t.Errorf("namespaces still worked after every Run returned: %v", w.working)
	}
	act.assertNoOverlap(t)
}

// TestShardingOffRunsShardedControllersOnTheLeader: without
// --enable-sharding a sharded controller is an ordinary leader-elected
// one, over every object, and no shard Lease is written.
func TestShardingOffRunsShardedControllersOnTheLeader(t *testing.T) {
	var objects []runtime.Object
	for i := range 10 {
		objects = append(objects, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: namespaceName(i)}})
	}
	w := newKeyWork()
	w.unsharded = true
	h := managertest.New(t, "unsharded-manager", []descriptor.Descriptor{w.descriptor("a")}, objects...)
	h.Options = fastElection("a")
	h.Start()
	managertest.Eventually(t, "a works every namespace", func() bool { _, n := w.spread(); return n == 10 })
	if st, _ := h.Manager.Status("pod-sharder"); st.Slots != nil {
		t.Errorf("Status.Slots = %v without sharding, want nil", st.Slots)
	}
	leases, err := h.Client.CoordinationV1().Leases("kube-system").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		if l.Name != "unsharded-manager" {
			t.Errorf("Lease %s written without sharding; want only the main Lease", l.Name)
		}
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	if len(w.overlaps) > 0 {
		t.Errorf("%v", w.overlaps)
	}
}

// gadget is a custom resource read through informers.Custom.
type gadget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

func (g *gadget) DeepCopyObject() runtime.Object {
	c := *g
	g.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

// A sharded controller's custom resource informer holds only its slot's
// objects, as its typed informers do: each slot term caches the gadgets
// of the namespaces that hash to its slot, and every gadget is cached by
// exactly one slot term.
func TestShardedCustomResourceInformersHoldTheirSlot(t *testing.T) {
	gadgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}
	var mu sync.Mutex
	cached := map[int][]string{} // slot → namespaces of the gadgets it caches
	d := descriptor.New("gadget-controller", func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		inf, err := informers.Custom[gadget](cc.Informers, gadgets)
		if err != nil {
			return nil, err
		}
		slot := cc.Shard.Slots[0]
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				return nil
			}
			var nss []string
			for _, obj := range inf.GetStore().List() {
				nss = append(nss, obj.(*gadget).Namespace)
			}
			mu.Lock()
			cached[slot] = nss
			mu.Unlock()
			<-ctx.Done()
			return nil
		}), nil
	}).Sharded(shard.ByNamespace)
	h := managertest.NewAPI(t, "gadget-manager", []descriptor.Descriptor{d}).ShardedAlone("only", 4)
	h.API.Serve(gadgets, "Gadget")
	space := shard.Space{Slots: 4}
	want := map[int][]string{}
	for _, ns := range strings.Fields("alpha bravo charlie delta echo foxtrot golf hotel india juliet " +
		"kilo lima mike november oscar papa quebec romeo sierra tango") {
		want[space.SlotOfKey(ns)] = append(want[space.SlotOfKey(ns)], ns)
		if err := h.API.Create(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Gadget",
			"metadata": map[string]any{"name": "g", "namespace": ns}}}); err != nil {
			t.Fatal(err)
		}
	}
	if len(want) < 2 {
		t.Fatalf("the test's namespaces fall in %d slot(s); pick names that spread", len(want))
	}
	h.Start()
	managertest.Eventually(t, "every slot term's cache synced", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(cached) == 4
	})
	mu.Lock()
	defer mu.Unlock()
	for slot := range 4 {
		got := slices.Sorted(slices.Values(cached[slot]))
		if exp := slices.Sorted(slices.Values(want[slot])); !slices.Equal(got, exp) {
			t.Errorf("slot %d caches gadgets of %v, want %v", slot, got, exp)
		}
	}
}
