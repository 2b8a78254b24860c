package serviceaccount

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/workloop"
)

func namespace(name string, phase corev1.NamespacePhase) *corev1.Namespace {
	return &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     corev1.NamespaceStatus{Phase: phase},
	}
}

func account(ns, name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// newFixture returns a controller over listers filled with the objects (and
// a fake clientset holding them too) and a queue that is shut down when the
// test ends.
func newFixture(
	t *testing.T,
	names []string,
	objs ...runtime.Object,
) (*controller, *fake.Clientset) {
	t.Helper()
	nsIdx := controllertest.ClusterIndexer(t, controllertest.OfType[*corev1.Namespace](objs)...)
	saIdx := controllertest.NamespacedIndexer(
		t,
		controllertest.OfType[*corev1.ServiceAccount](objs)...)
	client := fake.NewClientset(objs...)
	c := &controller{
		client:     client,
		namespaces: corelisters.NewNamespaceLister(nsIdx),
		accounts:   corelisters.NewServiceAccountLister(saIdx),
		names:      names,
		workers:    1,
	}
	c.loop = workloop.New("test", c.sync, workloop.Options{})
	t.Cleanup(c.loop.ShutDown)
	return c, client
}

func creates(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		if c, ok := a.(k8stesting.CreateActionImpl); ok {
			sa := c.Object.(*corev1.ServiceAccount)
			out = append(out, c.Namespace+"/"+sa.Name)
		}
	}
	slices.Sort(out)
	return out
}

func TestSync(t *testing.T) {
	terminating := apierrors.NewForbidden(
		corev1.Resource("serviceaccounts"),
		"default",
		errors.New("namespace is terminating"),
	)
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{
		{Type: corev1.NamespaceTerminatingCause},
	}
	tests := []struct {
		name        string
		names       []string
		objs        []runtime.Object
		createErr   error
		wantCreates []string
		wantErr     string
	}{
		{
			name:        "creates default in an active namespace",
			names:       []string{"default"},
			objs:        []runtime.Object{namespace("ns", corev1.NamespaceActive)},
			wantCreates: []string{"ns/default"},
		},
		{
			name:  "existing default is left alone",
			names: []string{"default"},
			objs: []runtime.Object{
				namespace("ns", corev1.NamespaceActive),
				account("ns", "default"),
			},
		},
		{
			name:  "only the missing ones of several",
			names: []string{"default", "builder"},
			objs: []runtime.Object{
				namespace("ns", corev1.NamespaceActive),
				account("ns", "default"),
			},
			wantCreates: []string{"ns/builder"},
		},
		{
			name:  "terminating namespace is skipped",
			names: []string{"default"},
			objs:  []runtime.Object{namespace("ns", corev1.NamespaceTerminating)},
		},
		{
			name:  "namespace gone",
			names: []string{"default"},
		},
		{
			name:        "already exists (informer behind) is not an error",
			names:       []string{"default"},
			objs:        []runtime.Object{namespace("ns", corev1.NamespaceActive)},
			createErr:   apierrors.NewAlreadyExists(corev1.Resource("serviceaccounts"), "default"),
			wantCreates: []string{"ns/default"},
		},
		{
			name:        "namespace turned terminating meanwhile is not an error",
			names:       []string{"default"},
			objs:        []runtime.Object{namespace("ns", corev1.NamespaceActive)},
			createErr:   terminating,
			wantCreates: []string{"ns/default"},
		},
		{
			name:        "other create errors are returned for a retry",
			names:       []string{"default"},
			objs:        []runtime.Object{namespace("ns", corev1.NamespaceActive)},
			createErr:   apierrors.NewInternalError(errors.New("etcd down")),
			wantCreates: []string{"ns/default"},
			wantErr:     "etcd down",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, client := newFixture(t, tt.names, tt.objs...)
			if tt.createErr != nil {
				client.PrependReactor(
					"create",
					"serviceaccounts",
					func(k8stesting.Action) (bool, runtime.Object, error) {
						return true, nil, tt.createErr
					},
				)
			}
			err := c.sync(controllertest.LogContext(t), "ns")
			if tt.wantErr == "" && err != nil ||
				tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("sync error %v, want %q", err, tt.wantErr)
			}
			if got := creates(client); !slices.Equal(got, tt.wantCreates) {
				t.Errorf("creates %v, want %v", got, tt.wantCreates)
			}
		})
	}
}

// The ServiceAccounts the controller ensures, and only those, sync their
// namespace, tombstones included.
func TestEnsuredAccountsSyncTheirNamespace(t *testing.T) {
	tests := []struct {
		name string
		obj  any
		want []string
	}{
		{"ensured account", account("a", "default"), []string{"a"}},
		{"ensured account, tombstone",
			cache.DeletedFinalStateUnknown{
				Key: "a/default",
				Obj: account("a", "default"),
			}, []string{"a"}},
		{"other account", account("a", "other"), nil},
		{"garbage", "not an object", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newFixture(t, []string{"default"})
			var got []string
			if c.ensured(nil, tt.obj) {
				obj := tt.obj
				if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = tomb.Obj // Watch hands the mapper the unwrapped object
				}
				got = namespaceOf(obj)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("keys = %v, want %v", got, tt.want)
			}
		})
	}
}
