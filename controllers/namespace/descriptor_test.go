package namespace_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/namespace"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptorAndFlags(t *testing.T) {
	controllertest.CheckIdentity(
		t,
		namespace.Descriptor(namespace.NewOptions()),
		controllertest.Identity{
			Name: "namespace-controller", Alias: "namespace",
		},
	)
	o := namespace.NewOptions()
	f := controllertest.ParseFlag(
		t,
		o.AddFlags,
		"concurrent-namespace-syncs",
		"--concurrent-namespace-syncs=3",
		"--namespace-sync-period=90s",
	)
	if f.DefValue != "10" ||
		f.Usage != "The number of namespace objects that are allowed to sync concurrently. Larger number = more responsive namespace termination, but more CPU (and network) load" {
		t.Errorf("concurrent-namespace-syncs: default %q usage %q", f.DefValue, f.Usage)
	}
	defaults := namespace.NewOptions()
	p := controllertest.ParseFlag(t, defaults.AddFlags, "namespace-sync-period")
	if p.DefValue != "5m0s" || p.Usage != "The period for syncing namespace life-cycle updates" {
		t.Errorf("namespace-sync-period: default %q usage %q", p.DefValue, p.Usage)
	}
	if o.ConcurrentNamespaceSyncs != 3 || o.NamespaceSyncPeriod != 90*time.Second {
		t.Errorf("parsed %d, %v; want 3, 1m30s", o.ConcurrentNamespaceSyncs, o.NamespaceSyncPeriod)
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		o       namespace.Options
		wantErr []string
	}{
		{"defaults", namespace.NewOptions(), nil},
		{"no periodic sync", namespace.Options{ConcurrentNamespaceSyncs: 1}, nil},
		{"zero workers", namespace.Options{NamespaceSyncPeriod: time.Minute},
			[]string{
				`descriptor "namespace-controller": --concurrent-namespace-syncs: must be at least 1, got 0`,
			}},
		{
			"both wrong",
			namespace.Options{ConcurrentNamespaceSyncs: -2, NamespaceSyncPeriod: -time.Second},
			[]string{`--concurrent-namespace-syncs: must be at least 1, got -2`,
				`--namespace-sync-period: must not be negative (0 turns the periodic sync off), got -1s`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			controllertest.CheckBuild(t, namespace.Descriptor(tt.o), tt.wantErr...)
		})
	}
}

// TestRunWithCancelledContext: Run returns and releases the queue (its
// goroutines) even when the term ended before it started.
func TestRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t, namespace.Descriptor(namespace.NewOptions()))
}

// TestInitWithoutMetadataClient: a host that cannot give a metadata client
// fails the controller's start with that reason.
func TestInitWithoutMetadataClient(t *testing.T) {
	d := namespace.Descriptor(namespace.NewOptions())
	cs := fake.NewClientset()
	_, err := d.Init()(t.Context(), descriptor.Context{
		Name: d.Name(), ClientBuilder: controllertest.ClientBuilder(cs, nil),
		InformerFactory: informers.NewSharedInformerFactory(
			cs,
			0,
		), EventRecorder: &record.FakeRecorder{},
	})
	if err == nil {
		t.Fatal("Init succeeded without a metadata client")
	}
}

// TestManagerEmptiesDeletedNamespace: in a manager over fake clients, a
// deleted namespace is emptied and finalized; another namespace is left
// alone.
func TestManagerEmptiesDeletedNamespace(t *testing.T) {
	now := metav1.Now()
	gone := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "gone", DeletionTimestamp: &now},
		Spec: corev1.NamespaceSpec{
			Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes},
		},
	}
	kept := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}
	cm := func(ns string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm"}}
	}
	h := managertest.New(
		t,
		"test",
		[]descriptor.Descriptor{namespace.Descriptor(namespace.NewOptions())},
		gone,
		kept,
		cm("gone"),
		cm("kept"),
	)
	h.Client.Resources = []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{
				Name:       "configmaps",
				Namespaced: true,
				Kind:       "ConfigMap",
				Verbs:      metav1.Verbs{"delete", "deletecollection", "list", "get"},
			},
			{
				Name:       "namespaces",
				Namespaced: false,
				Kind:       "Namespace",
				Verbs:      metav1.Verbs{"delete", "list", "get"},
			},
		}},
	}
	h.Start()
	controllertest.WaitFor(t, "the deleted namespace to be finalized", func() bool {
		ns, err := h.Client.CoreV1().Namespaces().Get(t.Context(), "gone", metav1.GetOptions{})
		return err == nil && len(ns.Spec.Finalizers) == 0
	})
	cms, err := h.Client.CoreV1().ConfigMaps("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cms.Items) != 1 || cms.Items[0].Namespace != "kept" {
		t.Errorf("config maps left %v, want only kept/cm", cms.Items)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
