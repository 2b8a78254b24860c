package storageversiongc

import (
	"errors"
	"slices"
	"strings"
	"testing"

	apiserverinternalv1alpha1 "k8s.io/api/apiserverinternal/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// identity is an API server's identity lease; label "" leaves the
// identity label out.
func identity(namespace, name, label string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if label != "" {
		l.Labels = map[string]string{identityLabel: label}
	}
	return l
}

func live(name string) *coordinationv1.Lease {
	return identity(metav1.NamespaceSystem, name, kubeAPIServer)
}

// entry is apiserver's entry, encoding version.
func entry(apiserver, version string) apiserverinternalv1alpha1.ServerStorageVersion {
	return apiserverinternalv1alpha1.ServerStorageVersion{APIServerID: apiserver,
		EncodingVersion: version, DecodableVersions: []string{version},
		ServedVersions: []string{version}}
}

func storageVersion(name string, entries ...apiserverinternalv1alpha1.ServerStorageVersion,
) *apiserverinternalv1alpha1.StorageVersion {
	return &apiserverinternalv1alpha1.StorageVersion{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: apiserverinternalv1alpha1.StorageVersionStatus{StorageVersions: entries}}
}

func newTestController(t *testing.T, objs ...runtime.Object) (*controller, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(controllertest.DeepCopies(objs...)...)
	client.ClearActions()
	return &controller{client: client,
		leases: coordinationlisters.NewLeaseLister(controllertest.NamespacedIndexer(t,
			controllertest.OfType[*coordinationv1.Lease](objs)...)),
	}, client
}

// writes are the controller's writes: "delete name" or "update name
// [ids] common" (common: the common encoding version, "-" for none).
func writes(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		switch a := a.(type) {
		case k8stesting.DeleteAction:
			out = append(out, "delete "+a.GetName())
		case k8stesting.UpdateAction:
			sv := a.GetObject().(*apiserverinternalv1alpha1.StorageVersion)
			var ids []string
			for _, e := range sv.Status.StorageVersions {
				ids = append(ids, e.APIServerID)
			}
			out = append(out, "update "+sv.Name+" "+strings.Join(ids, ",")+" "+
				ptr.Deref(sv.Status.CommonEncodingVersion, "-")+"/"+a.GetSubresource())
		}
	}
	return out
}

func TestSyncStorageVersion(t *testing.T) {
	tests := []struct {
		name string
		objs []runtime.Object
		want []string
	}{
		{"every API server is alive: nothing",
			[]runtime.Object{live("a"), live("b"),
				storageVersion("apps.deployments", entry("a", "apps/v1"), entry("b", "apps/v1"))},
			nil},
		{"one gone: its entry removed, the common version set",
			[]runtime.Object{live("a"),
				storageVersion("apps.deployments", entry("a", "apps/v1"), entry("b", "apps/v2"))},
			[]string{"update apps.deployments a apps/v1/status"}},
		{"the rest disagree: no common version",
			[]runtime.Object{live("a"), live("b"), storageVersion("apps.deployments",
				entry("a", "apps/v1"), entry("gone", "apps/v1"), entry("b", "apps/v2"))},
			[]string{"update apps.deployments a,b -/status"}},
		{"a lease without the identity label does not count",
			[]runtime.Object{live("a"), identity(metav1.NamespaceSystem, "b", ""),
				storageVersion("apps.deployments", entry("a", "apps/v1"), entry("b", "apps/v1"))},
			[]string{"update apps.deployments a apps/v1/status"}},
		{"a lease of another component does not count",
			[]runtime.Object{live("a"), identity(metav1.NamespaceSystem, "b", "kube-scheduler"),
				storageVersion("apps.deployments", entry("a", "apps/v1"), entry("b", "apps/v1"))},
			[]string{"update apps.deployments a apps/v1/status"}},
		{"a lease in another namespace does not count",
			[]runtime.Object{live("a"), identity("default", "b", kubeAPIServer),
				storageVersion("apps.deployments", entry("a", "apps/v1"), entry("b", "apps/v1"))},
			[]string{"update apps.deployments a apps/v1/status"}},
		{"none left: deleted",
			[]runtime.Object{storageVersion("apps.deployments", entry("a", "apps/v1"))},
			[]string{"delete apps.deployments"}},
		{"no entry at all: nothing",
			[]runtime.Object{storageVersion("apps.deployments")}, nil},
		{"gone: nothing", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, client := newTestController(t, tt.objs...)
			if err := c.syncStorageVersion(controllertest.LogContext(t),
				"apps.deployments"); err != nil {
				t.Fatal(err)
			}
			if got := writes(client); !slices.Equal(got, tt.want) {
				t.Errorf("wrote %q, want %q", got, tt.want)
			}
		})
	}
}

// TestPruneSetsTheCondition: the status written carries the
// AllEncodingVersionsEqual condition as the API server's own updater sets
// it.
func TestPruneSetsTheCondition(t *testing.T) {
	c, client := newTestController(t, live("a"),
		storageVersion("apps.deployments", entry("a", "apps/v1"), entry("b", "apps/v2")))
	if err := c.syncStorageVersion(t.Context(), "apps.deployments"); err != nil {
		t.Fatal(err)
	}
	sv, err := client.InternalV1alpha1().StorageVersions().Get(t.Context(), "apps.deployments",
		metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sv.Status.Conditions) != 1 {
		t.Fatalf("conditions %+v, want one", sv.Status.Conditions)
	}
	cond := sv.Status.Conditions[0]
	if cond.Type != apiserverinternalv1alpha1.AllEncodingVersionsEqual ||
		cond.Status != apiserverinternalv1alpha1.ConditionTrue ||
		cond.Reason != "CommonEncodingVersionSet" {
		t.Errorf("condition %+v", cond)
	}
}

func TestSyncLease(t *testing.T) {
	tests := []struct {
		name string
		objs []runtime.Object
		want []string
	}{
		{"the lease is back: nothing",
			[]runtime.Object{live("b"), storageVersion("apps.deployments", entry("b", "apps/v1"))},
			nil},
		{"gone: its entries removed everywhere",
			[]runtime.Object{
				storageVersion("apps.deployments", entry("a", "apps/v1"), entry("b", "apps/v1")),
				storageVersion("batch.jobs", entry("b", "batch/v1")),
				storageVersion("core.pods", entry("a", "v1"))},
			[]string{"delete batch.jobs", "update apps.deployments a apps/v1/status"}},
		{"gone, named nowhere: nothing", []runtime.Object{storageVersion("core.pods",
			entry("a", "v1"))}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, client := newTestController(t, tt.objs...)
			if err := c.syncLease(controllertest.LogContext(t), "b"); err != nil {
				t.Fatal(err)
			}
			got := writes(client)
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("wrote %q, want %q", got, tt.want)
			}
		})
	}
}

// TestSyncErrors: a lease that cannot be read is retried; a failed write
// does not stop the others and is returned.
func TestSyncErrors(t *testing.T) {
	boom := errors.New("boom")
	c, client := newTestController(t)
	client.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, boom
	})
	if err := c.syncLease(t.Context(), "b"); !errors.Is(err, boom) {
		t.Errorf("syncLease = %v, want the read's error", err)
	}

	c, client = newTestController(t,
		storageVersion("apps.deployments", entry("b", "apps/v1")),
		storageVersion("batch.jobs", entry("b", "batch/v1")))
	client.PrependReactor("delete", "storageversions",
		func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.(k8stesting.DeleteAction).GetName() == "apps.deployments" {
				return true, nil, boom
			}
			return false, nil, nil
		})
	err := c.syncLease(t.Context(), "b")
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "apps.deployments") {
		t.Errorf("syncLease = %v, want the failed delete's error, naming it", err)
	}
	if _, err := client.InternalV1alpha1().StorageVersions().Get(t.Context(), "batch.jobs",
		metav1.GetOptions{}); err == nil {
		t.Error("the other StorageVersion was left")
	}
}

func TestEvents(t *testing.T) {
	c, _ := newTestController(t, live("a"), identity(metav1.NamespaceSystem, "c", ""))
	c.leaseGC = workloop.New("leases", nil, workloop.Options{})
	c.versions = workloop.New("versions", nil, workloop.Options{})
	defer c.leaseGC.ShutDown()
	defer c.versions.ShutDown()
	for _, obj := range []any{
		live("a"),
		cache.DeletedFinalStateUnknown{Key: "kube-system/b", Obj: live("b")},
		identity("default", "c", kubeAPIServer),
		identity(metav1.NamespaceSystem, "d", ""),
		storageVersion("x"),
	} {
		c.leaseDeleted(obj)
	}
	if n := c.leaseGC.Len(); n != 2 {
		t.Errorf("%d deleted leases queued, want 2 (the identity leases of kube-system)", n)
	}
	for _, obj := range []any{
		storageVersion("alive", entry("a", "v1")),
		storageVersion("empty"),
		storageVersion("unknown", entry("a", "v1"), entry("b", "v1")),
		storageVersion("unlabelled", entry("c", "v1")),
		live("a"),
	} {
		c.storageVersionChanged(obj)
	}
	if n := c.versions.Len(); n != 2 {
		t.Errorf("%d StorageVersions queued, want 2 (unknown, unlabelled)", n)
	}
}
