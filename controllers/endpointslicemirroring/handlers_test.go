package endpointslicemirroring

//lint:file-ignore SA1019 Endpoints are deprecated, and what this controller mirrors (as KCM's)

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

func TestEndpointsToMirror(t *testing.T) {
	plain := newEndpoints("web")
	skip := newEndpoints("web")
	skip.Labels[discoveryv1.LabelSkipMirror] = "true"
	election := newEndpoints("web")
	election.Annotations[resourcelock.LeaderElectionRecordAnnotationKey] = "{}"
	tests := []struct {
		name     string
		old, obj any
		want     bool
	}{
		{"add", nil, plain, true},
		{"add, skip-mirror", nil, skip, false},
		{"add, leader election", nil, election, false},
		{"update", plain, plain, true},
		{"update to skip-mirror (its slices go)", plain, skip, true},
		{"update from skip-mirror", skip, plain, true},
		{"update, skip-mirror both", skip, election, false},
		{"delete", nil, plain, true},
		{"delete, skip-mirror", nil, skip, false},
		{"not an Endpoints", nil, &corev1.Service{}, false},
	}
	for _, tt := range tests {
		if got := endpointsToMirror(tt.old, tt.obj); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestSelectorlessChange(t *testing.T) {
	none := newService("web", nil)
	with := newService("web", map[string]string{"a": "b"})
	other := newService("web", map[string]string{"a": "c"})
	tests := []struct {
		name     string
		old, obj any
		want     bool
	}{
		{"add without a selector", nil, none, true},
		{"add with one", nil, with, false},
		{"selector added", none, with, true},
		{"selector removed", with, none, true},
		{"selector changed", with, other, false},
		{"other change without one", none, none, false},
		{"not a Service", nil, newEndpoints("web"), false},
	}
	for _, tt := range tests {
		if got := selectorlessChange(tt.old, tt.obj); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestSliceHandlers: changes to slices sync their Endpoints after the
// batch period when they are this controller's and not its own writes.
func TestSliceHandlers(t *testing.T) {
	o := NewOptions()
	o.EndpointUpdatesBatchPeriod = 3 * time.Second
	f := newFixture(t, o, newService("web", nil),
		newEndpoints("web", sub(addrs("10.0.0.1"), nil, port("http", 80))))
	f.syncAndMirror("ns/web")
	mine := f.written()[0]
	c := f.c
	want := func(what string, keys ...string) {
		t.Helper()
		var got []string
		for _, r := range f.requeues {
			if r.After != 3*time.Second {
				t.Errorf("%s: %s enqueued after %v, want the batch period", what, r.Key, r.After)
			}
			got = append(got, r.Key)
		}
		if !slices.Equal(got, keys) {
			t.Errorf("%s: enqueued %q, want %q", what, got, keys)
		}
		f.requeues = nil
	}
	c.sliceAdded(&mine)
	want("its own create delivered")
	newer := mine.DeepCopy()
	newer.Generation++
	c.sliceUpdated(&mine, newer)
	want("changed by someone else", "ns/web")
	c.sliceAdded(newer)
	want("a slice it has not seen", "ns/web")

	others := mine.DeepCopy()
	others.Labels[discoveryv1.LabelManagedBy] = "someone-else"
	c.sliceUpdated(&mine, others)
	want("taken over", "ns/web")
	c.sliceUpdated(others, others)
	want("another manager's")
	c.sliceAdded(others)
	want("another manager's, added")

	moved := mine.DeepCopy()
	moved.Labels[discoveryv1.LabelServiceName] = "api"
	c.sliceUpdated(&mine, moved)
	want("moved to another Service", "ns/api", "ns/web")

	unlabelled := mine.DeepCopy()
	delete(unlabelled.Labels, discoveryv1.LabelServiceName)
	c.sliceUpdated(unlabelled, unlabelled.DeepCopy())
	want("no service name")

	c.sliceDeleted(cache.DeletedFinalStateUnknown{Key: "ns/" + mine.Name, Obj: &mine})
	want("deleted by someone else", "ns/web")
	c.sliceDeleted(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns",
		Name: "untracked", Labels: mine.Labels}})
	want("an untracked slice deleted")
}

// TestOwnDeletionIsNotRepaired: the deletion of a slice the controller
// deleted itself does not sync its Endpoints.
func TestOwnDeletionIsNotRepaired(t *testing.T) {
	ep := newEndpoints("web", sub(addrs("10.0.0.1", "2001:db8::1"), nil, port("http", 80)))
	f := newFixture(t, NewOptions(), newService("web", nil), ep)
	f.syncAndMirror("ns/web")
	before := f.written()
	ep = ep.DeepCopy()
	ep.Subsets[0].Addresses = addrs("10.0.0.1")
	if err := f.endpoints.Update(ep); err != nil {
		t.Fatal(err)
	}
	f.syncAndMirror("ns/web")
	for i := range before {
		if before[i].AddressType == discoveryv1.AddressTypeIPv6 {
			f.c.sliceDeleted(&before[i])
		}
	}
	if len(f.requeues) != 0 || controllertest.CountActions(f.client, "delete", "") != 1 {
		t.Errorf("requeues %v, deletes %d; want none, 1", f.requeues,
			controllertest.CountActions(f.client, "delete", ""))
	}
}
