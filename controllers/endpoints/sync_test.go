package endpoints

//lint:file-ignore SA1019 Endpoints are deprecated, and what this controller maintains (as KCM's)

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

// render writes subsets as "ready|notReady|ports;..." with IPs and
// name=port.
func render(subsets []corev1.EndpointSubset) string {
	var parts []string
	for _, s := range subsets {
		var r, n, p []string
		for _, a := range s.Addresses {
			r = append(r, a.IP)
		}
		for _, a := range s.NotReadyAddresses {
			n = append(n, a.IP)
		}
		for _, port := range s.Ports {
			p = append(p, fmt.Sprintf("%s=%d", port.Name, port.Port))
		}
		parts = append(
			parts,
			strings.Join(r, ",")+"|"+strings.Join(n, ",")+"|"+strings.Join(p, ","),
		)
	}
	return strings.Join(parts, ";")
}

func TestSyncWritesEndpoints(t *testing.T) {
	terminating := func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) }
	tests := []struct {
		name string
		objs []runtime.Object
		want string
	}{
		{"ready and not ready",
			[]runtime.Object{
				newService("web"),
				newPod("a", "10.0.0.1", true, 8080),
				newPod("b", "10.0.0.2", false, 8080),
			},
			"10.0.0.1|10.0.0.2|http=8080"},
		{"terminating, unstarted and finished pods are left out",
			[]runtime.Object{newService("web"), newPod("a", "10.0.0.1", true, 8080),
				newPod("b", "10.0.0.2", true, 8080, terminating),
				newPod("c", "", true, 8080, func(p *corev1.Pod) { p.Status.PodIPs = nil }),
				newPod(
					"d",
					"10.0.0.4",
					true,
					8080,
					func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed },
				)},
			"10.0.0.1||http=8080"},
		{"publishNotReadyAddresses lists not-ready and terminating pods as ready",
			[]runtime.Object{
				newService(
					"web",
					func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true },
				),
				newPod(
					"a",
					"10.0.0.1",
					false,
					8080,
				),
				newPod("b", "10.0.0.2", true, 8080, terminating),
			},
			"10.0.0.1,10.0.0.2||http=8080"},
		{"named target port resolved per pod",
			[]runtime.Object{
				newService("web"),
				newPod("a", "10.0.0.1", true, 8080),
				newPod("b", "10.0.0.2", true, 9090),
			},
			"<two subsets>"},
		{"a pod without the named port is left out",
			[]runtime.Object{newService("web"), newPod("a", "10.0.0.1", true, 8080),
				newPod(
					"b",
					"10.0.0.2",
					true,
					8080,
					func(p *corev1.Pod) { p.Spec.Containers[0].Ports = nil },
				)},
			"10.0.0.1||http=8080"},
		{"headless without ports",
			[]runtime.Object{
				newService(
					"web",
					func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone; s.Spec.Ports = nil },
				),
				newPod("a", "10.0.0.1", true, 8080),
			},
			"10.0.0.1||"},
		{"no ports and not headless: no addresses",
			[]runtime.Object{
				newService("web", func(s *corev1.Service) { s.Spec.Ports = nil }),
				newPod("a", "10.0.0.1", true, 8080),
			},
			""},
		{"pods of another IP family are left out",
			[]runtime.Object{
				newService(
					"web",
					func(s *corev1.Service) { s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol} },
				),
				newPod("a", "10.0.0.1", true, 8080),
				newPod("b", "fd00::2", true, 8080),
			},
			"fd00::2||http=8080"},
		{"a Service without families nor cluster IP takes the family of the pod IP",
			[]runtime.Object{newService("web", func(s *corev1.Service) {
				s.Spec.IPFamilies, s.Spec.ClusterIP = nil, corev1.ClusterIPNone
			}), newPod("a", "fd00::1", true, 8080, func(p *corev1.Pod) {
				p.Status.PodIPs = []corev1.PodIP{{IP: "fd00::1"}, {IP: "10.0.0.1"}}
			})},
			"fd00::1||http=8080"},
		{"a named port of a sidecar counts, not one of an init container",
			[]runtime.Object{newService("web"),
				newPod("a", "10.0.0.1", true, 8080, withInitPort(sidecar)),
				newPod("b", "10.0.0.2", true, 8080, withInitPort(""))},
			"10.0.0.1||http=7070"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.objs...)
			if err := f.sync("ns/web"); err != nil {
				t.Fatal(err)
			}
			ep := f.get("web")
			if ep == nil {
				t.Fatal("no Endpoints written")
			}
			got := render(ep.Subsets)
			if tt.want == "<two subsets>" {
				if len(ep.Subsets) != 2 || !strings.Contains(got, "10.0.0.1||http=8080") ||
					!strings.Contains(got, "10.0.0.2||http=9090") {
					t.Errorf("subsets %q, want one per port number", got)
				}
			} else if got != tt.want {
				t.Errorf("subsets %q, want %q", got, tt.want)
			}
			if ep.Labels[managedByLabel] != managedBy || ep.Labels["team"] != "a" {
				t.Errorf("labels %v", ep.Labels)
			}
			_, headless := ep.Labels[corev1.IsHeadlessService]
			if want := tt.objs[0].(*corev1.Service).Spec.ClusterIP == corev1.ClusterIPNone; headless != want {
				t.Errorf("headless label %v, want %v", headless, want)
			}
		})
	}
}

func TestSyncAddressDetails(t *testing.T) {
	p := newPod(
		"a",
		"10.0.0.1",
		true,
		8080,
		func(p *corev1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "a", "web" },
	)
	f := newFixture(t, newService("web"), p)
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	a := f.get("web").Subsets[0].Addresses[0]
	if a.Hostname != "a" || ptr.Deref(a.NodeName, "") != "node-1" || a.TargetRef == nil ||
		*a.TargetRef != (corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "a", UID: "uid-a"}) {
		t.Errorf("address %+v (target %+v)", a, a.TargetRef)
	}
	if _, ok := f.get("web").Annotations[corev1.EndpointsLastChangeTriggerTime]; !ok {
		t.Errorf("annotations %v lack the trigger time", f.get("web").Annotations)
	}
}

func TestSyncLeavesOthersAlone(t *testing.T) {
	manual := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: "1"},
		Subsets: []corev1.EndpointSubset{
			{Addresses: []corev1.EndpointAddress{{IP: "192.0.2.1"}}},
		},
	}
	tests := []struct {
		name string
		svc  *corev1.Service
	}{
		{"no selector", newService("web", func(s *corev1.Service) { s.Spec.Selector = nil })},
		{
			"ExternalName",
			newService(
				"web",
				func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName },
			),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.svc, manual, newPod("a", "10.0.0.1", true, 8080))
			if err := f.sync("ns/web"); err != nil {
				t.Fatal(err)
			}
			if n := len(f.client.Actions()); n != 0 {
				t.Errorf("%d API calls, want none: %v", n, f.client.Actions())
			}
		})
	}
}

func TestSyncDeletesEndpointsOfMissingService(t *testing.T) {
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	f := newFixture(t, ep)
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	if f.get("web") != nil {
		t.Error("Endpoints of a missing Service still there")
	}
	// Already gone: still no error.
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
}

// TestSyncSkipsUnchanged: a second sync over what was written does not
// write; a change of the Service's labels does.
func TestSyncSkipsUnchanged(t *testing.T) {
	f := newFixture(
		t,
		newService("web"),
		newPod("a", "10.0.0.1", true, 8080),
		newPod("b", "10.0.0.2", false, 8080),
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
		t.Errorf("second sync made %d calls", n)
	}
	ep := f.get("web")
	ep.Labels["extra"] = "x"
	ep.ResourceVersion = "1"
	if err := f.endpoints.Update(ep); err != nil {
		t.Fatal(err)
	}
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	if got := controllertest.CountActions(f.client, "update", "endpoints"); got != 1 {
		t.Errorf("%d updates after a stray label, want 1", got)
	}
	if _, ok := f.get("web").Labels["extra"]; ok {
		t.Error("stray label kept")
	}
}

// TestSyncStaleCache: after an update, the version it replaced is not
// acted on again.
func TestSyncStaleCache(t *testing.T) {
	old := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: "5"},
	}
	f := newFixture(t, newService("web"), old, newPod("a", "10.0.0.1", true, 8080))
	f.client.PrependReactor(
		"update",
		"endpoints",
		func(a clienttesting.Action) (bool, runtime.Object, error) {
			ep := a.(clienttesting.UpdateAction).GetObject().(*corev1.Endpoints).DeepCopy()
			ep.ResourceVersion = "6"
			return true, ep, nil
		},
	)
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()
	err := f.sync("ns/web")
	if err == nil || !strings.Contains(err.Error(), "resource version 5 already processed") {
		t.Fatalf("sync over the stale cache: %v", err)
	}
	if n := len(f.client.Actions()); n != 0 {
		t.Errorf("a stale sync made %d calls", n)
	}
}

func TestSyncFailureEvents(t *testing.T) {
	tests := []struct {
		name   string
		objs   []runtime.Object
		verb   string
		reason string
	}{
		{"create", nil, "create", "FailedToCreateEndpoint"},
		{
			"update",
			[]runtime.Object{
				&corev1.Endpoints{
					ObjectMeta: metav1.ObjectMeta{
						Namespace:       "ns",
						Name:            "web",
						ResourceVersion: "1",
					},
				},
			},
			"update",
			"FailedToUpdateEndpoint",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(
				t,
				append(tt.objs, newService("web"), newPod("a", "10.0.0.1", true, 8080))...)
			f.client.PrependReactor(
				tt.verb,
				"endpoints",
				func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("boom")
				},
			)
			if err := f.sync("ns/web"); err == nil {
				t.Fatal("sync succeeded")
			}
			select {
			case e := <-f.recorder.Events:
				if !strings.HasPrefix(e, "Warning "+tt.reason+" ") {
					t.Errorf("event %q, want %s", e, tt.reason)
				}
			default:
				t.Error("no event")
			}
		})
	}
}

func TestSyncOverCapacity(t *testing.T) {
	objs := []runtime.Object{newService("web")}
	for i := range maxCapacity + 5 {
		objs = append(
			objs,
			newPod(
				fmt.Sprintf("p%04d", i),
				fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256),
				i%2 == 0,
				8080,
			),
		)
	}
	f := newFixture(t, objs...)
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	ep := f.get("web")
	n := 0
	ready := 0
	for _, s := range ep.Subsets {
		n += len(s.Addresses) + len(s.NotReadyAddresses)
		ready += len(s.Addresses)
	}
	if n != maxCapacity || ready != (maxCapacity+5+1)/2 {
		t.Errorf(
			"%d addresses (%d ready), want %d with every ready one kept",
			n,
			ready,
			maxCapacity,
		)
	}
	if ep.Annotations[corev1.EndpointsOverCapacity] != "truncated" {
		t.Errorf("annotations %v", ep.Annotations)
	}
}

func TestTruncateCutsReadyWhenTheyAloneOverflow(t *testing.T) {
	addrs := func(n int) []corev1.EndpointAddress {
		out := make([]corev1.EndpointAddress, n)
		for i := range out {
			out[i].IP = fmt.Sprint(i)
		}
		return out
	}
	ep := &corev1.Endpoints{Subsets: []corev1.EndpointSubset{
		{Addresses: addrs(900), NotReadyAddresses: addrs(10)},
		{Addresses: addrs(300)},
	}}
	if !truncate(ep) {
		t.Fatal("not truncated")
	}
	// 1000 * 900/1200 = 750, then 1000 * 300/1200 = 250.
	if a, b := len(ep.Subsets[0].Addresses), len(ep.Subsets[1].Addresses); a != 750 || b != 250 {
		t.Errorf("kept %d and %d ready addresses, want 750 and 250", a, b)
	}
	if len(ep.Subsets[0].NotReadyAddresses) != 0 {
		t.Error("not-ready addresses kept")
	}
	if truncate(
		&corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Addresses: addrs(maxCapacity)}}},
	) {
		t.Error("an Endpoints at capacity was truncated")
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

// TestSyncTriggerTimeFromPodReadiness: once the Service is known, the
// trigger time is when a pod's readiness last changed.
func TestSyncTriggerTimeFromPodReadiness(t *testing.T) {
	f := newFixture(t, newService("web"), newPod("a", "10.0.0.1", false, 8080))
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
	ep := f.get("web")
	if got := render(ep.Subsets); got != "10.0.0.1||http=8080" {
		t.Errorf("subsets %q, want the pod ready", got)
	}
	if got := ep.Annotations[corev1.EndpointsLastChangeTriggerTime]; got != "2026-02-01T12:00:00Z" {
		t.Errorf("trigger time %q, want the pod's readiness change", got)
	}
}

// TestSyncTriggerTimeOnlyForNewChanges: the first sync stamps the trigger
// time (the Service's creation); a later sync that must rewrite the object
// (an over-capacity one always does) without any new pod or Service change
// drops the annotation, as KCM does.
func TestSyncTriggerTimeOnlyForNewChanges(t *testing.T) {
	objs := []runtime.Object{newService("web")}
	for i := range maxCapacity + 1 {
		objs = append(
			objs,
			newPod(fmt.Sprintf("p%04d", i), fmt.Sprintf("10.0.%d.%d", i/256, i%256), true, 8080),
		)
	}
	f := newFixture(t, objs...)
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	if got := f.get("web").Annotations[corev1.EndpointsLastChangeTriggerTime]; got != "2026-01-01T00:00:00Z" {
		t.Errorf("first trigger time %q, want the Service's creation", got)
	}
	f.mirror()
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	ep := f.get("web")
	if _, ok := ep.Annotations[corev1.EndpointsLastChangeTriggerTime]; ok {
		t.Errorf("trigger time kept without a new change: %v", ep.Annotations)
	}
	if ep.Annotations[corev1.EndpointsOverCapacity] != "truncated" {
		t.Errorf("over-capacity annotation lost: %v", ep.Annotations)
	}
}
