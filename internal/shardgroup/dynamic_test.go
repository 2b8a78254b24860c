package shardgroup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/shard"
)

var (
	widgetsGVR = schema.GroupVersionResource{
		Group:    "example.com",
		Version:  "v1",
		Resource: "widgets",
	}
	clustersGVR = schema.GroupVersionResource{
		Group:    "example.com",
		Version:  "v1",
		Resource: "clusters",
	}
)

func customObject(kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.com/v1")
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(types.UID(fmt.Sprintf("uid-%s-%s", ns, name)))
	return u
}

func scopeOf(_ context.Context, gvr schema.GroupVersionResource) (bool, error) {
	switch gvr {
	case widgetsGVR:
		return true, nil
	case clustersGVR:
		return false, nil
	}
	return false, errors.New("not found in discovery")
}

// TestDynamicInformers: dynamic informers over a Dynamic cache only their
// slots' objects of a namespaced custom resource (keyed by namespace, or
// by UID); a cluster-scoped one passes whole when keyed by namespace; a
// resource whose scope is unknown fails to list instead of holding
// everything.
func TestDynamicInformers(t *testing.T) {
	held := []int{0, 3}
	var objs []runtime.Object
	for i := range 30 {
		objs = append(objs, customObject("Widget", generated("ns-", i), "w"))
	}
	objs = append(objs, customObject("Cluster", "", "c1"), customObject("Cluster", "", "c2"))
	for _, tc := range []struct {
		keying       shard.Keying
		wantClusters int
	}{
		{shard.ByNamespace, 2},
		{shard.ByUID, -1}, // those of the held slots
	} {
		t.Run(fmt.Sprint(tc.keying), func(t *testing.T) {
			sp := shard.Space{Slots: 4, Keying: tc.keying}
			inner := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(
				runtime.NewScheme(),
				map[schema.GroupVersionResource]string{
					widgetsGVR:  "WidgetList",
					clustersGVR: "ClusterList",
				},
				objs...)
			d, err := NewDynamic(inner, sp, held, scopeOf)
			if err != nil {
				t.Fatal(err)
			}
			mine := func(o runtime.Object) bool {
				s, err := sp.SlotOf(o)
				return err == nil && slices.Contains(held, s)
			}
			want := map[schema.GroupVersionResource]int{}
			for _, o := range objs {
				gvr := widgetsGVR
				if o.(*unstructured.Unstructured).GetKind() == "Cluster" {
					gvr = clustersGVR
				}
				if mine(o) {
					want[gvr]++
				}
			}
			if tc.wantClusters >= 0 {
				want[clustersGVR] = tc.wantClusters
			}
			if want[widgetsGVR] == 0 || want[widgetsGVR] == 30 {
				t.Fatalf("the test's objects all fall on one side (%d of 30)", want[widgetsGVR])
			}

			f := dynamicinformer.NewDynamicSharedInformerFactory(d, 0)
			widgets, clusters := f.ForResource(widgetsGVR).
				Informer(),
				f.ForResource(clustersGVR).
					Informer()
			ctx, cancel := context.WithCancel(context.Background())
			defer func() { cancel(); f.Shutdown() }()
			f.Start(ctx.Done())
			if !cache.WaitForCacheSync(ctx.Done(), widgets.HasSynced, clusters.HasSynced) {
				t.Fatal("caches did not sync")
			}
			for gvr, inf := range map[schema.GroupVersionResource]cache.SharedIndexInformer{
				widgetsGVR: widgets, clustersGVR: clusters} {
				if got := len(inf.GetStore().List()); got != want[gvr] {
					t.Errorf("%s: %d cached, want %d", gvr.Resource, got, want[gvr])
				}
			}

			// A watch event of another slot's object is dropped too.
			var other string
			for i := 30; other == ""; i++ {
				if o := customObject("Widget", generated("ns-", i), "w"); !mine(o) {
					other = o.GetNamespace()
				}
			}
			if _, err := inner.Resource(widgetsGVR).Namespace(other).Create(ctx,
				customObject("Widget", other, "w"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			// The namespaced client passes the rest through: Get sees it.
			if _, err := d.Resource(widgetsGVR).Namespace(other).Get(ctx, "w", metav1.GetOptions{}); err != nil {
				t.Errorf("Get through the Dynamic: %v", err)
			}
			l, err := d.Resource(widgetsGVR).Namespace(other).List(ctx, metav1.ListOptions{})
			if err != nil || len(l.Items) != 0 {
				t.Errorf("List in another slot's namespace = %v, %v; want it empty", l, err)
			}
			if d.Dropped(widgetsGVR) == 0 {
				t.Error(
					"Dropped = 0 after the fake, which ignores the selector, sent other slots' objects",
				)
			}
		})
	}

	d, err := NewDynamic(
		dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()),
		shard.Space{Slots: 4},
		held,
		scopeOf,
	)
	if err != nil {
		t.Fatal(err)
	}
	unknown := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}
	if _, err := d.Resource(unknown).List(context.Background(), metav1.ListOptions{}); err == nil {
		t.Error("listing a resource of unknown scope succeeded; want the discovery error")
	}
}
