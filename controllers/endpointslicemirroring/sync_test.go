package endpointslicemirroring

//lint:file-ignore SA1019 Endpoints are deprecated, and what this controller mirrors (as KCM's)

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

// dualStack is an Endpoints of two subsets: IPv4 and IPv6 addresses, ready
// and not, on two ports; and one IPv4 address on a third port.
func dualStack() *corev1.Endpoints {
	ep := newEndpoints("web",
		sub(addrs("10.0.0.1", "2001:db8::1"), addrs("10.0.0.2"),
			port("http", 80), port("metrics", 9090)),
		sub(addrs("10.0.0.3"), nil, port("grpc", 443)))
	ep.Annotations[corev1.EndpointsLastChangeTriggerTime] = "2026-01-01T00:00:00Z"
	ep.Annotations[corev1.LastAppliedConfigAnnotation] = "{}"
	return ep
}

func TestMirrorWritesSlicesPerAddressTypeAndPorts(t *testing.T) {
	f := newFixture(t, NewOptions(), newService("web", nil), dualStack())
	f.syncAndMirror("ns/web")
	got := f.written()
	want := []string{
		"IPv4 [grpc=443] 10.0.0.3+",
		"IPv4 [http=80,metrics=9090] 10.0.0.1+ 10.0.0.2-",
		"IPv6 [http=80,metrics=9090] 2001:db8::1+",
	}
	if r := renderAll(got); !slices.Equal(r, want) {
		t.Fatalf("slices\n  %q\nwant\n  %q", r, want)
	}
	for _, s := range got {
		if s.GenerateName != "web-" || !strings.HasPrefix(s.Name, "web-") {
			t.Errorf("name %q generateName %q, want generated from web-", s.Name, s.GenerateName)
		}
		wantLabels := map[string]string{"team": "a", discoveryv1.LabelServiceName: "web",
			discoveryv1.LabelManagedBy: ManagedBy}
		if !maps.Equal(s.Labels, wantLabels) {
			t.Errorf("labels %v, want %v", s.Labels, wantLabels)
		}
		if !maps.Equal(s.Annotations, map[string]string{"note": "x"}) {
			t.Errorf("annotations %v, want only note (no trigger time, no last-applied)",
				s.Annotations)
		}
		ref := metav1.GetControllerOf(&s)
		if ref == nil || ref.Kind != "Endpoints" || ref.APIVersion != "v1" || ref.Name != "web" ||
			ref.UID != "ep-web" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
			t.Errorf("controller %+v, want the Endpoints web", ref)
		}
		for _, e := range s.Endpoints {
			if e.TargetRef == nil || e.NodeName == nil || *e.NodeName != "node-1" ||
				e.Conditions.Serving != nil || e.Conditions.Terminating != nil || e.Zone != nil {
				t.Errorf("endpoint %+v: want target and node, no serving/terminating/zone", e)
			}
		}
	}
	if ev := controllertest.Events(f.recorder); len(ev) != 0 {
		t.Errorf("events %q, want none", ev)
	}
	// A second sync over its own writes writes nothing.
	f.client.ClearActions()
	f.syncAndMirror("ns/web")
	if w := f.writes(); len(w) != 0 {
		t.Errorf("an unchanged Endpoints made writes %q", w)
	}
}

// TestNotMirrored: what deletes every mirrored slice, and writes nothing
// else; slices of others (another manager, another Service) stay.
func TestNotMirrored(t *testing.T) {
	mirrored := func(name, svc string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc,
				discoveryv1.LabelManagedBy: ManagedBy}},
			AddressType: discoveryv1.AddressTypeIPv4}
	}
	others := mirrored("web-by-others", "web")
	others.Labels[discoveryv1.LabelManagedBy] = "someone-else"
	skip := dualStack()
	skip.Labels[discoveryv1.LabelSkipMirror] = "true"
	election := dualStack()
	election.Annotations[resourcelock.LeaderElectionRecordAnnotationKey] = "{}"
	notTrue := dualStack()
	notTrue.Labels[discoveryv1.LabelSkipMirror] = "false"
	tests := []struct {
		name string
		objs []runtime.Object
		want []string // the slices left, by name; nil: the mirror itself
	}{
		{"Service with a selector", []runtime.Object{newService("web", map[string]string{"a": "b"}),
			dualStack()}, []string{"other", "web-by-others"}},
		{"no Service", []runtime.Object{dualStack()}, []string{"other", "web-by-others"}},
		{"no Endpoints", []runtime.Object{newService("web", nil)},
			[]string{"other", "web-by-others"}},
		{"skip-mirror label", []runtime.Object{newService("web", nil), skip},
			[]string{"other", "web-by-others"}},
		{"skip-mirror label not true: mirrored", []runtime.Object{newService("web", nil), notTrue},
			nil},
		{"leader-election record", []runtime.Object{newService("web", nil), election},
			[]string{"other", "web-by-others"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := append(slices.Clone(tt.objs), mirrored("web-1", "web"),
				mirrored("web-2", "web"), mirrored("other", "other"), others)
			f := newFixture(t, NewOptions(), objs...)
			f.syncAndMirror("ns/web")
			var names []string
			for _, s := range f.written() {
				names = append(names, s.Name)
			}
			if tt.want == nil {
				// Mirrored: web-1 and web-2 (IPv4, no ports) are
				// rewritten into the two IPv4 groups; the IPv6 one is new.
				if !slices.Contains(names, "web-1") || !slices.Contains(names, "web-2") ||
					len(names) != 5 {
					t.Errorf("slices %q, want web-1 and web-2 reused, one new", names)
				}
				return
			}
			if !slices.Equal(names, tt.want) {
				t.Errorf("slices %q, want %q", names, tt.want)
			}
			if c := controllertest.CountActions(f.client, "create", ""); c != 0 {
				t.Errorf("%d creates", c)
			}
		})
	}
}

func TestMaxEndpointsPerSubset(t *testing.T) {
	o := NewOptions()
	o.MaxEndpointsPerSubset = 2
	ep := newEndpoints("web",
		sub(addrs("10.0.0.3", "10.0.0.1", "10.0.0.2"), addrs("10.0.0.4"), port("http", 80)),
		sub(addrs("10.0.0.5"), addrs("10.0.0.9"), port("grpc", 443)))
	f := newFixture(t, o, newService("web", nil), ep)
	f.syncAndMirror("ns/web")
	// The ready addresses first, in IP order: 10.0.0.1 and .2 make it.
	want := []string{"IPv4 [grpc=443] 10.0.0.5+ 10.0.0.9-", "IPv4 [http=80] 10.0.0.1+ 10.0.0.2+"}
	if r := renderAll(f.written()); !slices.Equal(r, want) {
		t.Errorf("slices %q, want %q", r, want)
	}
	ev := controllertest.Events(f.recorder)
	if want := "Warning TooManyAddressesToMirror A max of 2 addresses can be mirrored to " +
		"EndpointSlices per Endpoints subset. 2 addresses were skipped"; !slices.Equal(ev,
		[]string{want}) {
		t.Errorf("events %q, want %q", ev, want)
	}
}

func TestInvalidAddressesAreSkipped(t *testing.T) {
	o := NewOptions()
	o.MaxEndpointsPerSubset = 2
	// Ordered first (addresses are taken by IP), the invalid address does
	// not count toward the most per subset; the IPv4-mapped IPv6 address
	// is IPv4, written canonically.
	bad := corev1.EndpointAddress{IP: "0.bad"}
	ep := newEndpoints("web", sub(append([]corev1.EndpointAddress{bad},
		corev1.EndpointAddress{IP: "::ffff:10.0.0.7"}, addr("10.0.0.8")), nil, port("http", 80)))
	f := newFixture(t, o, newService("web", nil), ep)
	f.syncAndMirror("ns/web")
	want := []string{"IPv4 [http=80] 10.0.0.7+ 10.0.0.8+"}
	if r := renderAll(f.written()); !slices.Equal(r, want) {
		t.Errorf("slices %q, want %q", r, want)
	}
	ev := controllertest.Events(f.recorder)
	want = []string{
		"Warning InvalidIPAddress Skipped 1 invalid IP addresses when mirroring to EndpointSlices"}
	if !slices.Equal(ev, want) {
		t.Errorf("events %q, want %q", ev, want)
	}
}

// TestUpdates: changes to the Endpoints rewrite the slices in place.
func TestUpdates(t *testing.T) {
	tests := []struct {
		name       string
		change     func(*corev1.Endpoints)
		want       []string
		wantWrites []string
	}{
		{"an address added", func(ep *corev1.Endpoints) {
			ep.Subsets[1].Addresses = append(ep.Subsets[1].Addresses, addr("10.0.0.4"))
		}, []string{
			"IPv4 [grpc=443] 10.0.0.3+ 10.0.0.4+",
			"IPv4 [http=80,metrics=9090] 10.0.0.1+ 10.0.0.2-",
			"IPv6 [http=80,metrics=9090] 2001:db8::1+",
		}, []string{"update endpointslices"}},
		{"an address becomes ready", func(ep *corev1.Endpoints) {
			ep.Subsets[0].Addresses = append(ep.Subsets[0].Addresses, addr("10.0.0.2"))
			ep.Subsets[0].NotReadyAddresses = nil
		}, []string{
			"IPv4 [grpc=443] 10.0.0.3+",
			"IPv4 [http=80,metrics=9090] 10.0.0.1+ 10.0.0.2+",
			"IPv6 [http=80,metrics=9090] 2001:db8::1+",
		}, []string{"update endpointslices"}},
		{"the IPv6 address goes: its slice is deleted", func(ep *corev1.Endpoints) {
			ep.Subsets[0].Addresses = addrs("10.0.0.1")
		}, []string{
			"IPv4 [grpc=443] 10.0.0.3+",
			"IPv4 [http=80,metrics=9090] 10.0.0.1+ 10.0.0.2-",
		}, []string{"delete endpointslices"}},
		{"a port changes: the old slices are reused", func(ep *corev1.Endpoints) {
			ep.Subsets[0].Ports[1].Port = 9091
		}, []string{
			"IPv4 [grpc=443] 10.0.0.3+",
			// KCM's order of ports: by their hash.
			"IPv4 [metrics=9091,http=80] 10.0.0.1+ 10.0.0.2-",
			"IPv6 [metrics=9091,http=80] 2001:db8::1+",
		}, []string{"update endpointslices", "update endpointslices"}},
		{"a label added", func(ep *corev1.Endpoints) { ep.Labels["new"] = "yes" }, nil,
			[]string{"update endpointslices", "update endpointslices", "update endpointslices"}},
		{"only the trigger time changes: nothing", func(ep *corev1.Endpoints) {
			ep.Annotations[corev1.EndpointsLastChangeTriggerTime] = "2026-02-02T00:00:00Z"
		}, nil, nil},
		{"recreated (another UID): rewritten", func(ep *corev1.Endpoints) { ep.UID = "ep-web-2" },
			nil, []string{"update endpointslices", "update endpointslices",
				"update endpointslices"}},
		{"all addresses go", func(ep *corev1.Endpoints) { ep.Subsets = nil }, []string{},
			[]string{"delete endpointslices", "delete endpointslices", "delete endpointslices"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep := dualStack()
			f := newFixture(t, NewOptions(), newService("web", nil), ep)
			f.syncAndMirror("ns/web")
			before := f.written()
			ep = ep.DeepCopy()
			tt.change(ep)
			if err := f.endpoints.Update(ep); err != nil {
				t.Fatal(err)
			}
			f.client.ClearActions()
			f.syncAndMirror("ns/web")
			if w := f.writes(); !slices.Equal(w, tt.wantWrites) {
				t.Errorf("writes %q, want %q", w, tt.wantWrites)
			}
			after := f.written()
			if r := renderAll(after); tt.want != nil && !slices.Equal(r, tt.want) {
				t.Errorf("slices\n  %q\nwant\n  %q", r, tt.want)
			}
			for _, s := range after {
				if !slices.ContainsFunc(before, func(b discoveryv1.EndpointSlice) bool {
					return b.Name == s.Name
				}) {
					t.Errorf("slice %s is new; want the old ones rewritten", s.Name)
				}
				if s.Labels[discoveryv1.LabelManagedBy] != ManagedBy ||
					metav1.GetControllerOf(&s).UID != ep.UID {
					t.Errorf("slice %s: labels %v, owner %v", s.Name, s.Labels, s.OwnerReferences)
				}
			}
			if ep.Labels["new"] != "" {
				for _, s := range after {
					if s.Labels["new"] != "yes" {
						t.Errorf("slice %s lacks the new label: %v", s.Name, s.Labels)
					}
				}
			}
		})
	}
}

// TestSliceEditedByOthers: a mirrored slice someone changed is written
// back; extra slices of one group are deleted, the oldest kept.
func TestSliceEditedByOthers(t *testing.T) {
	ep := newEndpoints("web", sub(addrs("10.0.0.1"), nil, port("http", 80)))
	f := newFixture(t, NewOptions(), newService("web", nil), ep)
	f.syncAndMirror("ns/web")
	first := f.written()[0]
	edited := first.DeepCopy()
	edited.Endpoints[0].Conditions.Ready = ptr.To(false)
	edited.Labels["extra"] = "1"
	dup := first.DeepCopy()
	dup.Name, dup.UID = "web-dup", "uid-web-dup"
	dup.CreationTimestamp = metav1.NewTime(first.CreationTimestamp.Add(1e9))
	if err := f.client.Tracker().Update(slicesGVR, edited, "ns"); err != nil {
		t.Fatal(err)
	}
	if err := f.client.Tracker().Add(dup); err != nil {
		t.Fatal(err)
	}
	f.mirror()
	// The tracker knows neither the edit nor the duplicate yet: the sync
	// a handler would start goes ahead (the tracker tracks web's slices by
	// generation, and the edited one's generation is unchanged here).
	f.client.ClearActions()
	f.syncAndMirror("ns/web")
	if w := f.writes(); !slices.Equal(w, []string{"update endpointslices",
		"delete endpointslices"}) {
		t.Errorf("writes %q, want the edit undone and the duplicate deleted", w)
	}
	got := f.written()
	if len(got) != 1 || got[0].Name != first.Name || got[0].Labels["extra"] != "" ||
		!ptr.Deref(got[0].Endpoints[0].Conditions.Ready, false) {
		t.Errorf("slices %+v, want %s as mirrored", got, first.Name)
	}
}

func TestStaleCacheIsRetried(t *testing.T) {
	f := newFixture(t, NewOptions(), newService("web", nil), dualStack())
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	// The cache has not delivered the slices just created.
	if err := f.sync("ns/web"); !errors.Is(err, errStaleSlices) {
		t.Errorf("sync over a stale cache = %v, want %v", err, errStaleSlices)
	}
	f.mirror()
	if err := f.sync("ns/web"); err != nil {
		t.Errorf("sync once delivered = %v", err)
	}
}

func TestBeingDeletedCreatesNothing(t *testing.T) {
	ep := dualStack()
	now := metav1.Now()
	ep.DeletionTimestamp = &now
	f := newFixture(t, NewOptions(), newService("web", nil), ep)
	f.syncAndMirror("ns/web")
	if w := f.writes(); len(w) != 0 {
		t.Errorf("writes %q, want none for an Endpoints being deleted", w)
	}
}

func TestWriteFailures(t *testing.T) {
	terminating := apierrors.NewForbidden(schema.GroupResource{Resource: "endpointslices"}, "",
		errors.New("namespace ns is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{
		{Type: corev1.NamespaceTerminatingCause}}
	tests := []struct {
		name    string
		err     error
		wantErr string
	}{
		{"namespace terminating: dropped", terminating, ""},
		{"other: retried", errors.New("boom"),
			"creating an EndpointSlice for Endpoints ns/web: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, NewOptions(), newService("web", nil), dualStack())
			f.client.PrependReactor("create", "endpointslices", func(clienttesting.Action) (bool,
				runtime.Object, error) {
				return true, nil, tt.err
			})
			err := f.sync("ns/web")
			if tt.wantErr == "" && err != nil || tt.wantErr != "" &&
				(err == nil || err.Error() != tt.wantErr) {
				t.Errorf("sync = %v, want %q", err, tt.wantErr)
			}
		})
	}
	t.Run("deleting fails", func(t *testing.T) {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "web-1", Labels: map[string]string{
				discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: ManagedBy}}}
		f := newFixture(t, NewOptions(), s)
		f.client.PrependReactor("delete", "endpointslices", func(clienttesting.Action) (bool,
			runtime.Object, error) {
			return true, nil, errors.New("boom")
		})
		err := f.sync("ns/web")
		if err == nil || !strings.Contains(err.Error(), "deleting 1 of the 1 EndpointSlices") {
			t.Errorf("sync = %v", err)
		}
	})
	t.Run("a bad key is dropped", func(t *testing.T) {
		f := newFixture(t, NewOptions())
		if err := f.sync("a/b/c"); err == nil {
			t.Error("no error for a bad key")
		}
	})
}

func TestNamePrefix(t *testing.T) {
	// The API server cuts a long generateName short: a dash is added to
	// the longest name too, as in KCM.
	long := strings.Repeat("a", 253)
	if p := namePrefix(long); p != long+"-" {
		t.Errorf("prefix of a 253-character name %q, want it with a dash", p)
	}
	if p := namePrefix("web"); p != "web-" {
		t.Errorf("prefix %q, want web-", p)
	}
}
