package managertest_test

import (
	"context"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/leader"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func widget(name string) *Widget {
	return &Widget{TypeMeta: metav1.TypeMeta{APIVersion: "example.com/v1", Kind: "Widget"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
}

// API.Remove, as the deletion of a CustomResourceDefinition, sends a
// DELETED event for each object it drops before it ends the watches, so
// that informers forget them.
func TestRemoveSendsDeletedEvents(t *testing.T) {
	h := managertest.NewAPI(t, "test", nil)
	h.API.Serve(widgets, "Widget")
	for _, n := range []string{"a", "b"} {
		if err := h.API.Create(widget(n)); err != nil {
			t.Fatal(err)
		}
	}
	res := h.API.Dynamic().Resource(widgets)
	list, err := res.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := res.Watch(t.Context(), metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	h.API.Remove(widgets)
	var deleted []string
	timeout := time.After(managertest.DefaultTimeout)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				if slices.Sort(deleted); !slices.Equal(deleted, []string{"a", "b"}) {
					t.Fatalf("the watch ended after DELETED for %v, want a and b", deleted)
				}
				return
			}
			if ev.Type != watch.Deleted {
				t.Fatalf("event %s, want DELETED", ev.Type)
			}
			deleted = append(deleted, ev.Object.(*unstructured.Unstructured).GetName())
		case <-timeout:
			t.Fatalf("the watch still open after DELETED for %v", deleted)
		}
	}
}

// API.Create keeps what a fixture sets of an object's identity: a test
// may refer to a seeded object by its UID (in ownerReferences, say).
func TestCreateKeepsASeededUID(t *testing.T) {
	h := managertest.NewAPI(t, "test", nil)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns",
		UID: types.UID("seeded-uid")}}
	if err := h.API.Create(cm); err != nil {
		t.Fatal(err)
	}
	got, err := h.API.Kube().CoreV1().ConfigMaps("ns").Get(t.Context(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != "seeded-uid" || got.ResourceVersion == "" {
		t.Errorf("uid %q, resourceVersion %q; want the seeded uid, and a resourceVersion",
			got.UID, got.ResourceVersion)
	}
}

// elected records which replica runs its controller.
func elected(running chan<- string, identity string) descriptor.Descriptor {
	return descriptor.New(
		"elected",
		func(_ context.Context, _ descriptor.Context) (descriptor.Controller, error) {
			return descriptor.ControllerFunc(func(ctx context.Context) error {
				running <- identity
				<-ctx.Done()
				return nil
			}), nil
		},
	)
}

// Share on harnesses made with NewAPI makes them use one API server, so
// that replicas competing for a Lease elect one leader.
func TestShareOnAPIHarnesses(t *testing.T) {
	running := make(chan string, 4)
	replica := func(identity string) *managertest.Harness {
		h := managertest.NewAPI(t, "elect", []descriptor.Descriptor{elected(running, identity)})
		h.Options.LeaderElect = true
		h.Options.LeaderElection = leader.Config{Identity: identity, LeaseDuration: 3 * time.Second,
			RenewDeadline: 1400 * time.Millisecond, RetryPeriod: 300 * time.Millisecond}
		return h
	}
	a := replica("a")
	b := replica("b").Share(a)
	if b.API != a.API {
		t.Fatal("Share left the second harness its own API server")
	}
	a.Start()
	b.Start()
	var first string
	select {
	case first = <-running:
	case <-time.After(managertest.DefaultTimeout):
		t.Fatal("no replica leads")
	}
	leases := a.API.Kube().CoordinationV1().Leases("kube-system")
	var l *coordinationv1.Lease
	managertest.Eventually(t, "the Lease naming "+first, func() bool {
		var err error
		l, err = leases.Get(t.Context(), "elect", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == first
	})
	other := map[string]*managertest.Harness{"a": b, "b": a}[first]
	if st, _ := other.Manager.Status("elected"); st.Phase == manager.PhaseRunning {
		t.Errorf("both replicas run the controller while %s holds the Lease", first)
	}
}

// SameAPI on harnesses made with NewAPI shares the API server too (their
// requests are told apart by their user agents).
func TestSameAPIOnAPIHarnesses(t *testing.T) {
	a := managertest.NewAPI(t, "test", nil)
	b := managertest.NewAPI(t, "test", nil).SameAPI(a)
	if b.API != a.API {
		t.Fatal("SameAPI left the second harness its own API server")
	}
}
