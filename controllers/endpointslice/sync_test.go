package endpointslice

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

// endpointSummary renders a slice's endpoints as "ip:ready/serving/terminating"
// sorted, with its ports as "name=port".
func endpointSummary(s discoveryv1.EndpointSlice) string {
	var eps []string
	for _, e := range s.Endpoints {
		c := e.Conditions
		eps = append(eps, e.Addresses[0]+":"+flag(c.Ready)+flag(c.Serving)+flag(c.Terminating))
	}
	slices.Sort(eps)
	var ports []string
	for _, p := range s.Ports {
		ports = append(ports, ptr.Deref(p.Name, "")+"="+itoa(ptr.Deref(p.Port, 0)))
	}
	return strings.Join(ports, ",") + " " + strings.Join(eps, ",")
}

func flag(b *bool) string {
	switch {
	case b == nil:
		return "-"
	case *b:
		return "T"
	}
	return "F"
}

func itoa(n int32) string {
	const digits = "0123456789"
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{digits[n%10]}, b...)
	}
	return string(b)
}

func summaries(ss []discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range ss {
		out = append(out, endpointSummary(s))
	}
	slices.Sort(out)
	return out
}

func TestSyncWritesSlices(t *testing.T) {
	terminating := func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) }
	tests := []struct {
		name string
		o    Options
		objs []runtime.Object
		// want are the endpoint summaries of the written slices.
		want []string
		// sizes, when set, replaces want: the endpoint counts of the
		// slices (which pod goes where is the library's choice).
		sizes []int
	}{
		{
			name: "ready, not ready and terminating pods",
			objs: []runtime.Object{newService("web"), newNode("node-1", "z1"),
				newPod("a", "10.0.0.1", true, 8080), newPod("b", "10.0.0.2", false, 8080),
				newPod("c", "10.0.0.3", true, 8080, terminating)},
			want: []string{"http=8080 10.0.0.1:TTF,10.0.0.2:FFF,10.0.0.3:FTT"},
		},
		{
			name: "a named target port resolved per pod splits the slices",
			objs: []runtime.Object{newService("web"), newNode("node-1", "z1"),
				newPod("a", "10.0.0.1", true, 8080), newPod("b", "10.0.0.2", true, 9090)},
			want: []string{"http=8080 10.0.0.1:TTF", "http=9090 10.0.0.2:TTF"},
		},
		{
			name: "publishNotReadyAddresses makes every endpoint ready",
			objs: []runtime.Object{
				newService(
					"web",
					func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true },
				),
				newNode("node-1", "z1"),
				newPod("b", "10.0.0.2", false, 8080),
			},
			want: []string{"http=8080 10.0.0.2:TFF"},
		},
		{
			name: "pods without an IP or finished are left out",
			objs: []runtime.Object{newService("web"), newNode("node-1", "z1"),
				newPod("a", "", true, 8080, func(p *corev1.Pod) { p.Status.PodIPs = nil }),
				newPod(
					"b",
					"10.0.0.2",
					false,
					8080,
					func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded },
				)},
			// The library writes an empty placeholder slice without ports.
			want: []string{" "},
		},
		{
			name: "slices hold at most MaxEndpointsPerSlice",
			o:    Options{MaxEndpointsPerSlice: 2},
			objs: []runtime.Object{newService("web"), newNode("node-1", "z1"),
				newPod(
					"a",
					"10.0.0.1",
					true,
					8080,
				), newPod("b", "10.0.0.2", true, 8080), newPod("c", "10.0.0.3", true, 8080)},
			sizes: []int{1, 2},
		},
		{
			name: "headless without ports",
			objs: []runtime.Object{
				newService(
					"web",
					func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone; s.Spec.Ports = nil },
				),
				newNode("node-1", "z1"),
				newPod("a", "10.0.0.1", true, 8080),
			},
			want: []string{" 10.0.0.1:TTF"},
		},
		{
			name: "a named port of a sidecar counts, not one of an init container",
			objs: []runtime.Object{newService("web"), newNode("node-1", "z1"),
				newPod("a", "10.0.0.1", true, 8080, withInitPort(sidecar)),
				newPod("b", "10.0.0.2", true, 8080, withInitPort(""))},
			want: []string{" 10.0.0.2:TTF", "http=7070 10.0.0.1:TTF"},
		},
		{
			name: "no selector: nothing",
			objs: []runtime.Object{
				newService("web", func(s *corev1.Service) { s.Spec.Selector = nil }),
				newPod("a", "10.0.0.1", true, 8080),
			},
		},
		{
			name: "ExternalName: nothing",
			objs: []runtime.Object{
				newService(
					"web",
					func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName },
				),
				newPod("a", "10.0.0.1", true, 8080),
			},
		},
		{
			name: "no Service: nothing",
			objs: []runtime.Object{newPod("a", "10.0.0.1", true, 8080)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.o, tt.objs...)
			if err := f.sync("ns/web"); err != nil {
				t.Fatal(err)
			}
			got := f.written()
			if tt.sizes != nil {
				var sizes []int
				for _, s := range got {
					sizes = append(sizes, len(s.Endpoints))
				}
				slices.Sort(sizes)
				if !slices.Equal(sizes, tt.sizes) {
					t.Errorf("slice sizes %v, want %v", sizes, tt.sizes)
				}
			} else if s := summaries(got); !slices.Equal(s, tt.want) {
				t.Errorf("slices %q, want %q", s, tt.want)
			}
			for _, s := range got {
				if s.Labels[discoveryv1.LabelManagedBy] != managedBy ||
					s.Labels[discoveryv1.LabelServiceName] != "web" ||
					s.Labels["team"] != "a" {
					t.Errorf("slice %s labels %v", s.Name, s.Labels)
				}
				if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Name != "web" ||
					!ptr.Deref(s.OwnerReferences[0].Controller, false) {
					t.Errorf("slice %s owners %v", s.Name, s.OwnerReferences)
				}
				if s.AddressType != discoveryv1.AddressTypeIPv4 {
					t.Errorf("slice %s address type %s", s.Name, s.AddressType)
				}
			}
		})
	}
}

func TestSyncHeadlessLabelZoneAndHostname(t *testing.T) {
	svc := newService("web", func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone })
	p := newPod(
		"a",
		"10.0.0.1",
		true,
		8080,
		func(p *corev1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "a", "web" },
	)
	f := newFixture(t, Options{}, svc, p, newNode("node-1", "z1"))
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	got := f.written()
	if len(got) != 1 {
		t.Fatalf("%d slices, want 1", len(got))
	}
	s := got[0]
	if _, ok := s.Labels[corev1.IsHeadlessService]; !ok {
		t.Errorf("labels %v lack %s", s.Labels, corev1.IsHeadlessService)
	}
	e := s.Endpoints[0]
	if ptr.Deref(e.Hostname, "") != "a" || ptr.Deref(e.Zone, "") != "z1" ||
		ptr.Deref(e.NodeName, "") != "node-1" {
		t.Errorf("endpoint hostname %v zone %v node %v", e.Hostname, e.Zone, e.NodeName)
	}
	if e.TargetRef == nil || e.TargetRef.Name != "a" || e.TargetRef.Kind != "Pod" {
		t.Errorf("target %v", e.TargetRef)
	}
	if _, ok := s.Annotations[corev1.EndpointsLastChangeTriggerTime]; !ok {
		t.Errorf("annotations %v lack the trigger time", s.Annotations)
	}
}

const sidecar = corev1.ContainerRestartPolicyAlways

// withInitPort moves a pod's "http" port to an init container, on 7070, a
// sidecar when policy is Always.
func withInitPort(policy corev1.ContainerRestartPolicy) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		c := corev1.Container{Name: "init", Ports: []corev1.ContainerPort{
			{Name: "http", ContainerPort: 7070, Protocol: corev1.ProtocolTCP}}}
		if policy != "" {
			c.RestartPolicy = &policy
		}
		p.Spec.Containers[0].Ports = nil
		p.Spec.InitContainers = []corev1.Container{c}
	}
}

// TestSyncPodOnMissingNode: a pod that is listed (it has an IP, be it only
// status.podIP) but whose Node the cache lacks is left out of the slices,
// and fails the sync so that it is retried.
func TestSyncPodOnMissingNode(t *testing.T) {
	onNode2 := func(p *corev1.Pod) { p.Spec.NodeName = "node-2" }
	onlyPodIP := func(p *corev1.Pod) { p.Status.PodIPs = nil }
	f := newFixture(t, Options{}, newService("web"), newNode("node-1", "z1"),
		newPod("a", "10.0.0.1", true, 8080),
		newPod("b", "10.0.0.2", true, 8080, onNode2),
		newPod("c", "10.0.0.3", true, 8080, onNode2, onlyPodIP))
	err := f.sync("ns/web")
	for _, pod := range []string{"b", "c"} {
		if err == nil || !strings.Contains(err.Error(), "skipping Pod "+pod+" ") {
			t.Errorf("sync error %v, want one skipping pod %s", err, pod)
		}
	}
	if s := summaries(f.written()); !slices.Equal(s, []string{"http=8080 10.0.0.1:TTF"}) {
		t.Errorf("slices %q, want pod a only", s)
	}
}

// TestSyncTriggerTimeFromPodReadiness: once the Service is known, the
// trigger time of the slices a sync changes is when a pod's readiness
// last changed.
func TestSyncTriggerTimeFromPodReadiness(t *testing.T) {
	f := newFixture(t, Options{}, newService("web"), newNode("node-1", "z1"),
		newPod("a", "10.0.0.1", false, 8080))
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	f.mirror()
	when := time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	ready := newPod("a", "10.0.0.1", true, 8080, func(p *corev1.Pod) {
		p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(when)
	})
	if err := f.pods.Update(cached(t, ready)[0]); err != nil {
		t.Fatal(err)
	}
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	got := f.written()
	if s := summaries(got); !slices.Equal(s, []string{"http=8080 10.0.0.1:TTF"}) {
		t.Fatalf("slices %q, want the pod ready", s)
	}
	at := got[0].Annotations[corev1.EndpointsLastChangeTriggerTime]
	if at != "2026-02-01T12:00:00Z" {
		t.Errorf("trigger time %q, want the pod's readiness change", at)
	}
}

// TestSyncIsIdempotentAndUpdates: a second sync over the written slices
// changes nothing; a pod turning ready updates the slice in place.
func TestSyncIsIdempotentAndUpdates(t *testing.T) {
	f := newFixture(
		t,
		Options{},
		newService("web"),
		newNode("node-1", "z1"),
		newPod("a", "10.0.0.1", false, 8080),
	)
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	f.mirror()
	f.client.ClearActions()
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.client.Actions()); n != 0 {
		t.Errorf("second sync made %d calls: %v", n, f.client.Actions())
	}
	if err := f.pods.Update(cached(t, newPod("a", "10.0.0.1", true, 8080))[0]); err != nil {
		t.Fatal(err)
	}
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	if got := controllertest.CountActions(f.client, "update", "endpointslices"); got != 1 {
		t.Errorf("%d slice updates, want 1", got)
	}
	if s := summaries(f.written()); !slices.Equal(s, []string{"http=8080 10.0.0.1:TTF"}) {
		t.Errorf("slices %q", s)
	}
}

// TestSyncStaleCache: a cache that has not yet delivered the controller's
// own write is not acted on.
func TestSyncStaleCache(t *testing.T) {
	written := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:  "ns",
			Name:       "web-abc",
			Generation: 2,
			UID:        "uid-slice",
			Labels: map[string]string{
				discoveryv1.LabelServiceName: "web",
				discoveryv1.LabelManagedBy:   managedBy,
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	cached := written.DeepCopy()
	cached.Generation = 1
	f := newFixture(
		t,
		Options{},
		newService("web"),
		newNode("node-1", "z1"),
		cached,
		newPod("a", "10.0.0.1", true, 8080),
	)
	f.c.tracker.Update(written)
	f.client.ClearActions()
	err := f.sync("ns/web")
	if !errors.Is(err, errStaleSlices) {
		t.Fatalf("sync error %v, want the stale-cache error", err)
	}
	if n := len(f.client.Actions()); n != 0 {
		t.Errorf("a stale sync made %d calls", n)
	}
}

// TestSyncIgnoresSlicesBeingDeleted: a slice with a deletionTimestamp is
// neither updated nor counted; a fresh one is made.
func TestSyncIgnoresSlicesBeingDeleted(t *testing.T) {
	dying := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         "ns",
			Name:              "web-old",
			DeletionTimestamp: ptr.To(metav1.Now()),
			Finalizers:        []string{"x"},
			Labels: map[string]string{
				discoveryv1.LabelServiceName: "web",
				discoveryv1.LabelManagedBy:   managedBy,
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	f := newFixture(
		t,
		Options{},
		newService("web"),
		newNode("node-1", "z1"),
		dying,
		newPod("a", "10.0.0.1", true, 8080),
	)
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	if got := controllertest.CountActions(f.client, "create", "endpointslices"); got != 1 {
		t.Errorf("%d creates, want 1", got)
	}
	if got := controllertest.CountActions(f.client, "update", "endpointslices") + controllertest.CountActions(f.client, "delete", "endpointslices"); got != 0 {
		t.Errorf("%d updates/deletes of the dying slice, want 0", got)
	}
}

func TestSyncFailureRecordsEvent(t *testing.T) {
	f := newFixture(
		t,
		Options{},
		newService("web"),
		newNode("node-1", "z1"),
		newPod("a", "10.0.0.1", true, 8080),
	)
	f.client.PrependReactor(
		"create",
		"endpointslices",
		func(a clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("boom")
		},
	)
	if err := f.sync("ns/web"); err == nil {
		t.Fatal("sync succeeded, want the create error")
	}
	select {
	case e := <-f.recorder.Events:
		if !strings.HasPrefix(e, "Warning FailedToUpdateEndpointSlices ") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no event")
	}
}
